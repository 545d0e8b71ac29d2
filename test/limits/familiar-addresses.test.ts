import t from 'tap'
import { users } from '../../src/db/schema.js'
import { createFamiliarAddresses } from '../../src/limits/familiar-addresses.js'
import { newUserRow } from '../../src/users/users-repository.js'
import { createTestDatabase, testDatabases } from '../helper.js'

for (const kind of testDatabases()) {
  t.test(`familiar addresses (${kind}): remembered on success, by e-mail in any case, answers cached`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const [{ id }] = await database.db.insert(users).values(newUserRow({ username: 'ana', email: 'ana@example.com', passwordHash: 'x' })).returning({ id: users.id })
    let now = 0
    const familiar = createFamiliarAddresses(database.db, { cacheMs: 1000, now: () => now })
    t.equal(await familiar.isFamiliar('ana@example.com', '192.0.2.1'), false, 'never logged in from there')
    await familiar.remember(id, 'ana@example.com', '192.0.2.1')
    t.equal(await familiar.isFamiliar('ANA@example.com', '192.0.2.1'), true, 'the e-mail in another case is the same account')
    t.equal(await familiar.isFamiliar('ana@example.com', '198.51.100.7'), false, 'another address is not')

    // A second instance reads the database, not this one's cache.
    const other = createFamiliarAddresses(database.db, { now: () => now })
    t.equal(await other.isFamiliar('ana@example.com', '192.0.2.1'), true, 'every instance sees it')
    // Within the cache time a refused address is not read again; after it, it is.
    await other.remember(id, 'ana@example.com', '198.51.100.7')
    t.equal(await familiar.isFamiliar('ana@example.com', '198.51.100.7'), false, 'the cached answer, within its second')
    now = 2000
    t.equal(await familiar.isFamiliar('ana@example.com', '198.51.100.7'), true, 'read again once the cache time passed')
  })
}
