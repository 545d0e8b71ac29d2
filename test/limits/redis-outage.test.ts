import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { App } from '../../src/app.js'
import { buildCheckedApp } from '../openapi/conformance.js'
import { assertBadCredentials, assertLoggedIn, assertSignedUp, assertTooMany, captureLog, createTestDatabase, errorBodies, loginFrom, seedAccounts, testConfig, testDatabases, type DatabaseKind, uniqueUser } from '../helper.js'
import { ownRedisSkip, startOwnRedis } from './own-redis.js'
import { createTcpProxy } from '../support/tcp-proxy.js'
import { until } from '../deploy/processes.js'

const { badCredentials } = errorBodies
const { user } = seedAccounts
type Answer = Awaited<ReturnType<App['inject']>>

/** `count` instances over one database and one Redis, as behind a balancer; the first seeds the accounts. */
async function instances (t: Test, kind: DatabaseKind, count: number, redisUrl: string) {
  const { database } = await createTestDatabase(t, kind)
  const log = captureLog()
  const apps: App[] = []
  for (let i = 0; i < count; i++) {
    const app = await buildCheckedApp(testConfig({ RATE_LIMITS: 'on', REDIS_URL: redisUrl }), { database, seed: i === 0, limitsKeyPrefix: 'ums-own:', logger: { level: 'warn', stream: log.stream } })
    t.teardown(() => app.close())
    apps.push(app)
  }
  return { apps, log }
}

/** The answer, and a check that it came within 3 s. */
async function timed<A extends Answer> (t: Test, what: string, request: () => Promise<A>): Promise<A> {
  const started = Date.now()
  const response = await request()
  const ms = Date.now() - started
  t.ok(ms < 3000, `${what}: answered in ${ms} ms`)
  return response
}

const login = (app: App, password: string, remoteAddress: string) => loginFrom(app, remoteAddress, user.email, password)
/** A sign-up of a new account; answered 201, it must be that account's whole `{ id, username, email }`. */
async function signup (app: App, remoteAddress: string) {
  const account = uniqueUser('ro')
  const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: account, remoteAddress })
  return Object.assign(response, { account })
}

/** Waits until each instance counts in Redis again (its write-back done); generous, the machine is shared. */
const sharedAgain = (apps: App[]) => until('counting shared again', () => apps.every((app) => app.limitsCounting?.isShared() === true), 20_000)

for (const kind of testDatabases()) {
  t.test(`Redis down or paused (CONTRACT §9) on ${kind}`, { skip: ownRedisSkip }, async (t) => {
    for (const outage of ['stopped', 'paused'] as const) {
      t.test(`with Redis ${outage}, sign-ups from one address get 429 after 20, each answer within 3 s`, async (t) => {
        const redis = await startOwnRedis(t)
        const { apps: [app], log } = await instances(t, kind, 1, redis.url)
        const first = await signup(app, '203.0.113.30')
        await assertSignedUp(t, app, first, first.account, 'the first, counted in Redis')
        if (outage === 'stopped') await redis.stop()
        else redis.pause()
        for (let i = 2; i <= 20; i++) {
          const response = await timed(t, `sign-up ${i}`, () => signup(app, '203.0.113.30'))
          await assertSignedUp(t, app, response, response.account, `sign-up ${i}`)
        }
        assertTooMany(t, await timed(t, 'sign-up 21', () => signup(app, '203.0.113.30')), 'the 21st, on this instance\'s counters')
        const other = await timed(t, 'another address', () => signup(app, '203.0.113.31'))
        await assertSignedUp(t, app, other, other.account, 'another address is not limited')
        t.equal(log.lines.filter((line) => /sign-up limit falls back/.test(line.msg)).length, 1, 'one warning, however many requests')
        redis.resume()
      })
    }

    t.test('a pair locked in Redis stays locked while Redis is paused; other logins answer within 3 s', async (t) => {
      const redis = await startOwnRedis(t)
      // The third answers nothing until Redis is back: its 429 then can only come from Redis's count.
      const { apps: [first, second, third], log } = await instances(t, kind, 3, redis.url)
      for (let i = 0; i < 10; i++) {
        const response = await login(first, 'Wrong12345', '203.0.113.40')
        t.equal(response.statusCode, 401)
        t.strictSame(response.json(), badCredentials)
      }
      assertTooMany(t, await login(second, user.password, '203.0.113.40'), 'the other instance sees the lock in Redis')
      redis.pause()
      assertTooMany(t, await timed(t, 'paused, first', () => login(first, user.password, '203.0.113.40')), 'the instance that counted the failures')
      assertTooMany(t, await timed(t, 'paused, second', () => login(second, user.password, '203.0.113.40')), 'the instance that saw the lock')
      assertLoggedIn(t, await timed(t, 'paused, another address', () => login(second, user.password, '203.0.113.41')), user, 'another address logs in')
      const wrong = await timed(t, 'paused, a wrong password', () => login(first, 'Wrong12345', '203.0.113.42'))
      t.equal(wrong.statusCode, 401)
      t.strictSame(wrong.json(), badCredentials)
      t.ok(log.lines.some((line) => /login limiter falls back/.test(line.msg)), 'a warning says so')
      redis.resume()
      // Back to Redis: its count was never lost.
      await sharedAgain([first, second])
      assertTooMany(t, await login(third, user.password, '203.0.113.40'), 'still locked in Redis once it answers again: an instance that saw none of it')
    })

    t.test('logins answered while Redis was paused do not hold their pair once it runs their commands late', async (t) => {
      const redis = await startOwnRedis(t)
      const { apps: [app] } = await instances(t, kind, 1, redis.url)
      redis.pause()
      // Each attempt's command waits in the socket and runs when Redis resumes, long after the
      // login fell back to this instance's counters and was answered.
      for (let i = 1; i <= 10; i++) assertLoggedIn(t, await timed(t, `paused, login ${i}`, () => login(app, user.password, '203.0.113.50')), user, `paused, login ${i}`)
      redis.resume()
      await sharedAgain([app])
      // Counting in Redis again, so the late commands have run: they must not hold the pair.
      assertLoggedIn(t, await login(app, user.password, '203.0.113.50'), user, 'once Redis answers again, not 503 for attempts long answered')
    })

    // A finish sent into a network that drops it never reaches Redis: the failures counted nowhere
    // and their attempts held the pair in flight for a minute (503 for right passwords meanwhile).
    t.test('failures whose outcome went into a silent network count in Redis once it is back, and hold nothing in flight', async (t) => {
      const redis = await startOwnRedis(t)
      const proxy = await createTcpProxy({ host: '127.0.0.1', port: Number(new URL(redis.url).port) })
      t.teardown(proxy.close)
      const { database } = await createTestDatabase(t, kind)
      // A high argon2 cost (150 ms a verify here, idle), so that the first verify outlasts the wait
      // for every attempt to be in flight; two at a time, so that none waits past the hash queue's
      // 2 s (503) on a busy machine.
      const app = await buildCheckedApp(testConfig({ RATE_LIMITS: 'on', REDIS_URL: `redis://127.0.0.1:${proxy.port}`, ARGON2_MEMORY_KIB: '65536', ARGON2_ITERATIONS: '3', HASH_CONCURRENCY: '2' }), { database, seed: true, limitsKeyPrefix: 'ums-own:' })
      t.teardown(() => app.close())
      const client = redis.client()
      const pairKey = async () => (await client.keys('ums-own:{login}:pair:*')).find((key) => !key.endsWith(':inflight'))
      const inFlight = async () => (await client.keys('ums-own:{login}:pair:*:inflight')).length === 0 ? 0 : await client.zcard((await client.keys('ums-own:{login}:pair:*:inflight'))[0])
      const logins = Array.from({ length: 4 }, () => login(app, 'Wrong12345', '203.0.113.90'))
      await until('all four in flight in Redis', async () => await inFlight() === 4, 5000, 5)
      await proxy.cut('half-open')
      for (const answer of await Promise.all(logins)) assertBadCredentials(t, answer)
      await proxy.restore()
      await sharedAgain([app])
      const key = await pairKey()
      t.strictSame([key === undefined ? null : await client.get(key), await inFlight()], ['4', 0], 'four failures on the pair, none left in flight')
      assertLoggedIn(t, await login(app, user.password, '203.0.113.90'), user, 'the right password is answered, not 503')
    })

    t.test('a Redis connection that goes silent is replaced: shared counting resumes once the path is back', async (t) => {
      const redis = await startOwnRedis(t)
      const proxy = await createTcpProxy({ host: '127.0.0.1', port: Number(new URL(redis.url).port) })
      t.teardown(proxy.close)
      const { apps: [app] } = await instances(t, kind, 1, `redis://127.0.0.1:${proxy.port}`)
      const keys = async () => (await redis.client().keys('ums-own:*')).length
      assertBadCredentials(t, await login(app, 'Wrong12345', '203.0.113.60'))
      const before = await keys()
      t.ok(before > 0, 'a failure is counted in Redis')
      // The connection stays open and everything sent on it is lost, as behind a balancer or NAT that lost its state.
      await proxy.cut('half-open')
      assertBadCredentials(t, await timed(t, 'silent Redis', () => login(app, 'Wrong12345', '203.0.113.61')), 'counted in this instance meanwhile')
      await proxy.restore()
      // Redis is reachable again, but not through the frozen connection.
      let counted = false
      for (let i = 0; i < 30 && !counted; i++) {
        assertBadCredentials(t, await login(app, 'Wrong12345', `203.0.113.${70 + i}`), `after the path is back, attempt ${i + 1}`)
        counted = (await keys()) > before
        if (!counted) await sleep(200)
      }
      t.ok(counted, 'failures are counted in Redis again within seconds')
    })

    t.test('on a Redis Cluster node, the keys of one decision share a slot: the script runs, and counts are shared', async (t) => {
      const redis = await startOwnRedis(t, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'])
      const admin = redis.client()
      await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383')
      for (let tries = 0; !/cluster_state:ok/.test(String(await admin.call('CLUSTER', 'INFO'))); tries++) {
        if (tries > 100) throw new Error('the one-node cluster did not come up')
        await sleep(100)
      }
      const { apps: [first, second], log } = await instances(t, kind, 2, redis.url)
      for (let i = 0; i < 10; i++) assertBadCredentials(t, await login(i % 2 === 0 ? first : second, 'Wrong12345', '203.0.113.50'))
      assertTooMany(t, await login(first, user.password, '203.0.113.50'), 'five failures on each instance add up in Redis')
      const counted = await signup(first, '203.0.113.50')
      await assertSignedUp(t, first, counted, counted.account, 'sign-ups are counted there too')
      t.strictSame(log.lines.filter((line) => /falls back/.test(line.msg)).map((line) => line.err?.message), [], 'Redis never refused a script (CROSSSLOT)')
    })
  })
}
