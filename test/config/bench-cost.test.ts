import t from 'tap'
import { ARGON2_MINIMUM } from '../../src/config/index.js'
import { ARGON2_COST } from '../../bench/lib.js'

// The bench hashes its users and measures raw argon2 and its ceilings at this cost; a copy that
// drifted from the service's default would compare the service with a different hash.
t.test("the bench's argon2 cost is the service's default", async (t) => {
  t.strictSame(ARGON2_COST, { ...ARGON2_MINIMUM })
})
