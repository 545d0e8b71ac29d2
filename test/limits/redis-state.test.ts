import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { buildCheckedApp } from '../openapi/conformance.js'
import { buildManagementApp } from '../../src/management/management-app.js'
import { createMetrics } from '../../src/telemetry/metrics.js'
import { captureLog, createTestDatabase, errorBodies, loginFrom, seedAccounts, testConfig, testDatabases } from '../helper.js'
import { ownRedisSkip, startOwnRedis } from './own-redis.js'
import { until } from '../deploy/processes.js'

const { badCredentials } = errorBodies
const { user } = seedAccounts

async function setup (t: Test, kind: Parameters<typeof createTestDatabase>[1], redisUrl: string) {
  const { database } = await createTestDatabase(t, kind)
  const log = captureLog()
  const metrics = createMetrics()
  const api = await buildCheckedApp(testConfig({ RATE_LIMITS: 'on', REDIS_URL: redisUrl }), { database, seed: true, metrics, limitsKeyPrefix: 'ums-own:', logger: { level: 'info', stream: log.stream } })
  t.teardown(() => api.close())
  await api.listen({ port: 0, host: '127.0.0.1' })
  const management = await buildManagementApp({ api, isShuttingDown: () => false })
  t.teardown(() => management.close())
  return { api, management, log }
}

/** The value of a series on /metrics, or undefined when it is absent. */
async function metric (management: Awaited<ReturnType<typeof setup>>['management'], series: string) {
  const text = (await management.inject('/metrics')).body
  const line = text.split('\n').find((line) => line.startsWith(series + ' '))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/** Polls `read` until it gives `expected` (20 s at most: the machine is shared), then gives what it reads. */
async function settled<T> (read: () => Promise<T>, expected: T): Promise<T> {
  await until(`reads ${String(expected)}`, async () => await read() === expected, 20_000).catch(() => {})
  return await read()
}

const failLogin = async (t: Test, api: App, what: string) => {
  const response = await loginFrom(api, '203.0.113.90', user.email, 'Wrong12345')
  t.strictSame([response.statusCode, response.json()], [401, badCredentials], what)
}

for (const kind of testDatabases()) {
  t.test(`Redis state on /metrics and in the log (CONTRACT §8, §9) on ${kind}`, { skip: ownRedisSkip }, async (t) => {
    t.test('limits_redis_up goes 1, 0, 1 across an outage; fallbacks are counted; readiness keeps the contract\'s body', async (t) => {
      const redis = await startOwnRedis(t)
      const { api, management } = await setup(t, kind, redis.url)
      const up = () => metric(management, 'limits_redis_up')
      t.equal(await up(), 1, 'counting in Redis')
      t.equal(await metric(management, 'limits_redis_fallbacks_total{limit="login"}'), undefined, 'no fallback yet')
      await redis.stop()
      t.equal(await settled(up, 0), 0, 'Redis stopped')
      await failLogin(t, api, 'a login while Redis is down')
      t.equal(await metric(management, 'limits_redis_fallbacks_total{limit="login"}'), 1, 'the login was decided on this instance\'s counters')
      const ready = await management.inject('/health/ready')
      t.strictSame([ready.statusCode, ready.json()], [200, { status: 'up', database: 'up' }], 'Redis down never makes the instance unready')
      await redis.restart()
      t.equal(await settled(up, 1), 1, 'Redis back, counts written back')
    })

    t.test('each outage is logged at both edges, even two within a minute', async (t) => {
      const redis = await startOwnRedis(t)
      const { api, log } = await setup(t, kind, redis.url)
      // An outage's edges: a second cause within one (the connection closed, then reconnections
      // refused while Redis is down) is its own warning, not a new outage.
      const edges = () => log.lines.filter((line) => /is unavailable; counting|answers again/.test(line.msg)).map((line) => [line.level, line.msg])
        .filter((edge, i, all) => edge[0] !== 40 || all[i - 1]?.[0] !== 40)
      const down = [40, 'Redis for the abuse limits is unavailable; counting in this instance until it is back']
      const back = [30, 'Redis for the abuse limits answers again: counting is shared across instances again']
      for (const outage of [1, 2]) {
        await redis.stop()
        await failLogin(t, api, `outage ${outage}: a login`)
        await failLogin(t, api, `outage ${outage}: another login`)
        await redis.restart()
        await settled(async () => edges().length, 2 * outage)
      }
      t.strictSame(edges(), [down, back, down, back], 'one warning as each outage starts, one info line as it ends')
      const backLines = log.lines.filter((line) => /answers again/.test(line.msg))
      t.strictSame(backLines.map((line) => line.writtenBack > 0), [true, true], 'saying how many counters were written back')
      t.notMatch(log.text(), /@example\.com/, 'no e-mail in the log')
    })

    // The failed connect's rejection ("Connection is closed.") and the close after it were said as
    // causes of their own beside the refusal that was the cause.
    t.test('Redis down at start: one warning, with the refusal as its cause', async (t) => {
      const redis = await startOwnRedis(t)
      await redis.stop()
      const { api, log } = await setup(t, kind, redis.url)
      await failLogin(t, api, 'a login while Redis is down')
      await new Promise((resolve) => setTimeout(resolve, 1500))
      const warnings = log.lines.filter((line) => /Redis for the abuse limits/.test(line.msg)).map((line) => [line.level, line.msg, line.err?.code])
      t.strictSame(warnings, [[40, 'Redis for the abuse limits is unavailable; counting in this instance until it is back', 'ECONNREFUSED']])
    })

    // ioredis reports a SELECT refused at connect, then goes on in db 0: counting there would
    // share keys with whatever else that database holds, unseen by the instances on the right one.
    t.test('a REDIS_URL database Redis refuses (past its `databases`): nothing is counted in db 0, the refusal is the outage\'s cause', async (t) => {
      const redis = await startOwnRedis(t, ['--databases', '4'])
      const { api, log, management } = await setup(t, kind, `${redis.url}/9`)
      await failLogin(t, api, 'a login while Redis refuses the database')
      await new Promise((resolve) => setTimeout(resolve, 1500))
      t.equal(await redis.client().dbsize(), 0, 'no key in db 0')
      t.equal(await metric(management, 'limits_redis_up'), 0, 'counting is not shared')
      const watch = log.lines.filter((line) => /Redis for the abuse limits/.test(line.msg)).map((line) => [line.level, line.msg, line.err?.message])
      t.strictSame(watch, [[40, 'Redis for the abuse limits is unavailable; counting in this instance until it is back', 'ERR DB index is out of range']])
    })

    // Out of memory under noeviction, Redis still answers reads: counting must not come back to it only to fall back again.
    t.test('a Redis that refuses writes is one outage: one warning, no "answers again" while it refuses', async (t) => {
      const redis = await startOwnRedis(t)
      const { api, log } = await setup(t, kind, redis.url)
      await failLogin(t, api, 'a login counted in Redis')
      const admin = redis.client()
      await admin.config('SET', 'maxmemory', '1')
      const started = Date.now()
      for (let i = 0; Date.now() - started < 4000; i++) {
        const response = await api.inject({ method: 'POST', url: '/auth/signup', payload: { username: `oom${i}`, email: `oom${i}@example.com`, password: 'Secreto123' }, remoteAddress: '203.0.113.91' })
        t.equal(response.statusCode, 201, `sign-up ${i} while Redis refuses writes`)
        await new Promise((resolve) => setTimeout(resolve, 400))
      }
      const edges = () => log.lines.filter((line) => /falls back|answers again/.test(line.msg)).map((line) => line.msg)
      t.strictSame(edges(), ['sign-up limit falls back to this instance\'s counters: Redis is unavailable'], 'one warning, nothing back')
      await admin.config('SET', 'maxmemory', '0')
      await settled(async () => edges().length, 2)
      t.strictSame(edges().at(-1), 'Redis for the abuse limits answers again: counting is shared across instances again', 'back once it takes writes')
    })
  })
}
