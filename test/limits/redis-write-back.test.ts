import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { assertLoggedIn, assertTooMany, captureLog, createTestDatabase, errorBodies, loginFrom, seedAccounts, testConfig, testDatabases, type DatabaseKind } from '../helper.js'
import { ownRedisSkip, startOwnRedis } from './own-redis.js'
import { until } from '../deploy/processes.js'

const { badCredentials } = errorBodies
const { user } = seedAccounts

/** `count` instances over one database and one Redis, as behind a balancer; the first seeds the accounts. */
async function instances (t: Test, kind: DatabaseKind, count: number, redisUrl: string) {
  const { database } = await createTestDatabase(t, kind)
  const apps: App[] = []
  for (let i = 0; i < count; i++) {
    const log = captureLog()
    const app = await buildApp(testConfig({ RATE_LIMITS: 'on', REDIS_URL: redisUrl }), { database, seed: i === 0, limitsKeyPrefix: 'ums-own:', logger: { level: 'warn', stream: log.stream } })
    t.teardown(() => app.close())
    await app.ready()
    apps.push(app)
  }
  return apps
}

/** Polls until each instance counts in Redis again (its write-back done); generous, the machine is shared. */
async function sharedAgain (t: Test, apps: App[], what: string) {
  await until(what, () => apps.every((app) => app.limitsCounting?.isShared() === true), 20_000)
    .catch(() => t.fail(`${what}: counting was not shared again within 20 s`))
}

const login = (app: App, password: string, remoteAddress: string) => loginFrom(app, remoteAddress, user.email, password)

async function fail (t: Test, app: App, times: number, remoteAddress: string, what: string) {
  for (let i = 1; i <= times; i++) {
    const response = await login(app, 'Wrong12345', remoteAddress)
    t.strictSame([response.statusCode, response.json()], [401, badCredentials], `${what}, failure ${i}`)
  }
}

for (const kind of testDatabases()) {
  t.test(`what an instance counted alone reaches Redis when it answers again (CONTRACT §9) on ${kind}`, { skip: ownRedisSkip }, async (t) => {
    t.test('ten failures while Redis is stopped lock the pair; after Redis restarts empty the lock holds here and on an instance that never saw them', async (t) => {
      const redis = await startOwnRedis(t)
      const [first, second] = await instances(t, kind, 2, redis.url)
      await redis.stop()
      await fail(t, first, 10, '203.0.113.80', 'Redis stopped')
      assertTooMany(t, await login(first, user.password, '203.0.113.80'), 'locked on this instance\'s counters, right password and all')
      await redis.restart()
      await sharedAgain(t, [first, second], 'Redis restarted')
      assertTooMany(t, await login(first, user.password, '203.0.113.80'), 'still locked on the instance that counted the failures')
      assertTooMany(t, await login(second, user.password, '203.0.113.80'), 'locked on the instance that never saw them')
      assertLoggedIn(t, await login(second, user.password, '203.0.113.81'), user, 'another address still logs in')
    })

    t.test('a pause where Redis kept its keys counts nothing twice: 5 failures before, 3 during, 2 after lock the pair at 10', async (t) => {
      const redis = await startOwnRedis(t)
      const [first, second] = await instances(t, kind, 2, redis.url)
      await fail(t, first, 5, '203.0.113.82', 'before the pause')
      redis.pause()
      await fail(t, first, 3, '203.0.113.82', 'Redis paused')
      redis.resume()
      await sharedAgain(t, [first, second], 'Redis resumed')
      await fail(t, second, 2, '203.0.113.82', 'after the pause, on the other instance')
      assertTooMany(t, await login(second, user.password, '203.0.113.82'), 'the eleventh attempt is refused: all ten failures are in Redis')
      assertTooMany(t, await login(first, user.password, '203.0.113.82'), 'on either instance')
    })

    t.test('after a restart each instance adds its own share once: 5 + 4 failures, then the tenth on a third instance locks', async (t) => {
      const redis = await startOwnRedis(t)
      const [first, second, third] = await instances(t, kind, 3, redis.url)
      await fail(t, first, 5, '203.0.113.83', 'first instance')
      await fail(t, second, 4, '203.0.113.83', 'second instance')
      await redis.stop()
      await redis.restart()
      await sharedAgain(t, [first, second, third], 'Redis restarted')
      await fail(t, third, 1, '203.0.113.83', 'the tenth, on an instance that saw none of the nine')
      assertTooMany(t, await login(third, user.password, '203.0.113.83'), 'the nine carried back and the tenth lock the pair')
    })

    t.test('a lock an instance only mirrored is carried too: the instance that counted it is gone when Redis restarts', async (t) => {
      const redis = await startOwnRedis(t)
      const [counter, witness, newcomer] = await instances(t, kind, 3, redis.url)
      await fail(t, counter, 10, '203.0.113.84', 'counted in Redis')
      assertTooMany(t, await login(witness, user.password, '203.0.113.84'), 'Redis reports the lock to the other instance')
      await counter.close()
      await redis.stop()
      await redis.restart()
      await sharedAgain(t, [witness, newcomer], 'Redis restarted')
      assertTooMany(t, await login(newcomer, user.password, '203.0.113.84'), 'the lock holds on an instance that never saw it')
    })

    t.test('a success while Redis was away clears the pair there too once it answers again', async (t) => {
      const redis = await startOwnRedis(t)
      const [first, second] = await instances(t, kind, 2, redis.url)
      await fail(t, first, 9, '203.0.113.85', 'before the pause')
      redis.pause()
      assertLoggedIn(t, await login(first, user.password, '203.0.113.85'), user, 'the right password, Redis paused')
      redis.resume()
      await sharedAgain(t, [first, second], 'Redis resumed')
      await fail(t, second, 9, '203.0.113.85', 'the counter started afresh')
      const tenth = await login(second, 'Wrong12345', '203.0.113.85')
      t.strictSame([tenth.statusCode, tenth.json()], [401, badCredentials], 'the tenth failure since the success is still answered')
      assertTooMany(t, await login(second, user.password, '203.0.113.85'), 'and then the pair locks')
    })
  })
}
