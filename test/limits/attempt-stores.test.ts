import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { createMemoryStore, type AttemptStore, type Take } from '../../src/limits/attempt-stores.js'
import { createLoginLimiter, type LoginVerdict } from '../../src/limits/login-limiter.js'
import { LOGIN_WINDOW_MS } from '../../src/limits/policy.js'
import { createRedisStore } from '../../src/limits/redis-attempt-store.js'
import { redisSkipReason, redisPrefix, TEST_REDIS_URL } from '../helper.js'

const stranger = async () => false
const familiar = async () => true

/** Begins a login and, when it was counted, finishes it with `outcome`; returns what begin said. */
async function login (limiter: ReturnType<typeof createLoginLimiter>, address: string, email: string, outcome: 'failure' | 'success' | 'abandoned' = 'failure', isFamiliar = stranger) {
  const verdict = await limiter.begin(address, email, isFamiliar)
  if (verdict.status === 'counted') await verdict.attempt.finish(outcome)
  return verdict.status === 'counted' ? 'counted' : withoutAttempt(verdict)
}
const withoutAttempt = (verdict: Exclude<LoginVerdict, { status: 'counted' }>) => verdict

const redisSkip = await redisSkipReason('the Redis store is not tested')

const stores: Array<[string, (t: Test) => AttemptStore, false | string]> = [
  ['memory', () => createMemoryStore(), false],
  ['Redis', (t) => {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 0 })
    t.teardown(() => redis.quit())
    return createRedisStore(redis)
  }, redisSkip]
]

for (const [name, makeStore, skip] of stores) {
  t.test(`the ${name} store counts only failures, refuses busy counters, and keeps a lock`, { skip }, async (t) => {
    const limiter = createLoginLimiter(makeStore(t), { prefix: redisPrefix(t) })

    t.test('ten attempts in flight fill the pair: the eleventh is busy, not locked', async (t) => {
      const inFlight = await Promise.all(Array.from({ length: 10 }, () => limiter.begin('192.0.2.1', 'a', stranger)))
      t.strictSame(inFlight.map((v) => v.status), Array(10).fill('counted'))
      t.strictSame(await limiter.begin('192.0.2.1', 'a', stranger), { status: 'busy', limit: 'pair' })
      for (const verdict of inFlight) if (verdict.status === 'counted') await verdict.attempt.finish('success')
      t.equal(await login(limiter, '192.0.2.1', 'a'), 'counted', 'ten successes later, nothing was a failure')
    })

    t.test('abandoned attempts (a 503) are forgotten', async (t) => {
      for (let i = 0; i < 30; i++) t.equal(await login(limiter, '192.0.2.2', 'b', 'abandoned'), 'counted')
      for (let i = 0; i < 10; i++) t.equal(await login(limiter, '192.0.2.2', 'b'), 'counted')
      const locked = await login(limiter, '192.0.2.2', 'b')
      t.strictSame(locked, { status: 'locked', limit: 'pair', retryAfterSeconds: 900 }, 'ten failures lock, thirty abandoned did not count')
    })

    t.test('a success clears its pair only', async (t) => {
      for (let i = 0; i < 9; i++) t.equal(await login(limiter, '192.0.2.3', 'c'), 'counted', `failure ${i + 1} before the success`)
      t.equal(await login(limiter, '192.0.2.3', 'c', 'success'), 'counted', 'the success')
      for (let i = 0; i < 9; i++) t.equal(await login(limiter, '192.0.2.3', 'c'), 'counted', `failure ${i + 1} after the success`)
      for (let i = 0; i < 32; i++) t.equal(await login(limiter, `192.0.2.${100 + (i % 4)}`, 'c'), 'counted', `failure ${i + 1} from another address`)
      t.strictSame(await login(limiter, '192.0.2.99', 'c'), { status: 'locked', limit: 'email', retryAfterSeconds: 900 }, 'the e-mail kept all 50 failures')
    })

    t.test('the per-e-mail limit never refuses a familiar address; the pair and address limits do', async (t) => {
      for (let i = 0; i < 50; i++) t.equal(await login(limiter, `198.51.100.${i % 5}`, 'bob'), 'counted', `failure ${i + 1}`)
      t.strictSame(await login(limiter, '198.51.100.77', 'bob'), { status: 'locked', limit: 'email', retryAfterSeconds: 900 }, 'a stranger')
      t.equal(await login(limiter, '198.51.100.77', 'bob', 'success', familiar), 'counted', 'bob at home')
      for (let i = 0; i < 10; i++) t.equal(await login(limiter, '198.51.100.77', 'bob', 'failure', familiar), 'counted')
      t.strictSame(await login(limiter, '198.51.100.77', 'bob', 'failure', familiar), { status: 'locked', limit: 'pair', retryAfterSeconds: 900 }, 'the pair still locks')
      let asked = 0
      t.strictSame(await login(limiter, '198.51.100.0', 'bob', 'failure', async () => { asked++; return true }), { status: 'locked', limit: 'pair', retryAfterSeconds: 900 }, 'the pair that failed ten times')
      t.equal(asked, 0, 'familiarity is not asked when the pair refuses as well')
    })
  })
}

t.test('the memory store forgets a window once it has passed, and stays bounded', async (t) => {
  let now = 0
  const limiter = createLoginLimiter(createMemoryStore({ now: () => now }))
  for (let i = 0; i < 10; i++) t.equal(await login(limiter, '192.0.2.1', 'e'), 'counted')
  t.strictSame(await login(limiter, '192.0.2.1', 'e'), { status: 'locked', limit: 'pair', retryAfterSeconds: 900 })
  now = LOGIN_WINDOW_MS - 1000
  t.strictSame(await login(limiter, '192.0.2.1', 'e'), { status: 'locked', limit: 'pair', retryAfterSeconds: 1 })
  now = LOGIN_WINDOW_MS
  t.equal(await login(limiter, '192.0.2.1', 'e'), 'counted', 'a new window starts')

  // An attempt whose instance never finished it stops holding the counter after a minute.
  const stuck = await Promise.all(Array.from({ length: 10 }, () => limiter.begin('192.0.2.9', 'f', stranger)))
  t.strictSame(stuck.map((v) => v.status), Array(10).fill('counted'), 'ten attempts begun and never finished')
  t.strictSame(await limiter.begin('192.0.2.9', 'f', stranger), { status: 'busy', limit: 'pair' })
  now += 60_000
  t.equal(await login(limiter, '192.0.2.9', 'f'), 'counted')

  // Full, the store makes room from the counters furthest from their limit: a flood of new keys
  // (one failure each) evicts its own kind, never the lock it was sent to lift.
  const store = createMemoryStore({ maxEntries: 30, now: () => now })
  const small = createLoginLimiter(store)
  for (let i = 0; i < 10; i++) t.equal(await login(small, '192.0.2.2', 'first'), 'counted')
  t.strictSame(await login(small, '192.0.2.2', 'first'), { status: 'locked', limit: 'pair', retryAfterSeconds: 900 })
  for (let i = 0; i < 200; i++) t.equal(await login(small, `192.0.2.${(i % 100) + 100}`, `other${i}`), 'counted')
  t.strictSame(await login(small, '192.0.2.2', 'first'), { status: 'locked', limit: 'pair', retryAfterSeconds: 900 }, 'the lock outlived 200 new e-mails')
  t.ok([...store.keys()].length <= 30, 'and the store stayed within its bound')
  t.ok([...store.keys()].some((key) => key.includes('other199')), 'making room for the newest')
})

t.test('every key of one decision carries the {login} hash tag (one Redis Cluster slot)', async (t) => {
  const seen: string[][] = []
  const recorder: AttemptStore = {
    async take (counters) {
      seen.push(counters.map((c) => c.key))
      return { status: 'busy', limiting: [0] } satisfies Take
    }
  }
  await createLoginLimiter(recorder, { prefix: 'ums:' }).begin('2001:db8::', 'hmac', stranger)
  t.strictSame(seen, [['ums:{login}:pair:2001:db8::|hmac', 'ums:{login}:email:hmac', 'ums:{login}:address:2001:db8::']])
})
