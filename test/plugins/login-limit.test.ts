import sensible from '@fastify/sensible'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t, { type Test } from 'tap'
import { LOGIN_LIMITS, LOGIN_WINDOW_MS } from '../../src/limits/policy.js'
import errorHandler from '../../src/plugins/error-handler.js'
import limitsRedis from '../../src/plugins/limits-redis.js'
import loginLimit from '../../src/plugins/login-limit.js'
import { baseLoggerOptions } from '../../src/telemetry/logger.js'
import { assertTooMany, captureLog, createTestDatabase, emailHmac, errorBodies, testConfig } from '../helper.js'

/** CONTRACT §7's e-mail digest, written out here: HMAC-SHA256 of the lower-cased e-mail under the digest key. */
/** The e-mail's HMAC the attempt carries (the digest key is the same whatever the limits). */
const anasHmac = emailHmac(testConfig().jwt.digestKey, 'ana@example.com')

// The login limiter's plugin alone, on a bare instance (the login route's use: test/limits/).
async function bareApp (t: Test, env: Record<string, string>, logger: object | false = false) {
  const { database } = await createTestDatabase(t, 'pglite')
  const config = testConfig(env)
  const app = Fastify({ logger })
  await app.register(sensible)
  await app.register(fp(async (app) => { app.decorate('database', database) }, { name: 'db' }))
  await app.register(limitsRedis, { config })
  await app.register(loginLimit, { config })
  await app.register(errorHandler)
  // A login that always fails: what the route does around the hash.
  app.post('/login', async (request, reply) => {
    const attempt = await app.loginLimiter.begin(request, reply, 'ana@example.com')
    await attempt.failed()
    return { emailHmac: attempt.emailHmac }
  })
  t.teardown(() => app.close())
  return app
}

t.test('failed logins of one address and e-mail are refused with 429 and Retry-After past the limit', async (t) => {
  const app = await bareApp(t, { RATE_LIMITS: 'on' })
  const answers = []
  for (let i = 0; i < LOGIN_LIMITS.pair; i++) answers.push(await app.inject({ method: 'POST', url: '/login' }))
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), Array(LOGIN_LIMITS.pair).fill([200, { emailHmac: anasHmac }]), 'each failure counted, for ana\'s e-mail')
  assertTooMany(t, await app.inject({ method: 'POST', url: '/login' }), 'the one past the limit', LOGIN_WINDOW_MS / 1000)
  assertTooMany(t, await app.inject({ method: 'POST', url: '/login' }), 'and the next', LOGIN_WINDOW_MS / 1000)
})

t.test('with RATE_LIMITS=off nothing is counted', async (t) => {
  const app = await bareApp(t, { RATE_LIMITS: 'off' })
  const answers = []
  for (let i = 0; i <= LOGIN_LIMITS.pair + 1; i++) answers.push(await app.inject({ method: 'POST', url: '/login' }))
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), Array(LOGIN_LIMITS.pair + 2).fill([200, { emailHmac: anasHmac }]))
})

t.test('logins in flight that fill a counter: the next gets 503, and one log line says why', async (t) => {
  const log = captureLog()
  const app = await bareApp(t, { RATE_LIMITS: 'on' }, { ...baseLoggerOptions({ logLevel: 'info' }), stream: log.stream })
  let begun = 0
  let release = () => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  app.post('/held', async (request, reply) => {
    const attempt = await app.loginLimiter.begin(request, reply, 'ana@example.com')
    begun++
    await released
    await attempt.abandoned()
    return { held: true }
  })
  const held = Array.from({ length: LOGIN_LIMITS.pair }, () => app.inject({ method: 'POST', url: '/held' }))
  while (begun < LOGIN_LIMITS.pair) await new Promise((resolve) => setImmediate(resolve))
  const refused = await app.inject({ method: 'POST', url: '/held' })
  t.strictSame([refused.statusCode, refused.json()], [503, errorBodies.unavailable])
  release()
  t.strictSame((await Promise.all(held)).map((answer) => [answer.statusCode, answer.json()]), Array(LOGIN_LIMITS.pair).fill([200, { held: true }]))
  const lines = log.lines.filter((line) => line.level >= 40)
  t.strictSame(lines.map(({ msg, event, reason }) => ({ msg, event, reason })),
    [{ msg: 'excess_rate_limit_exceeded', event: 'excess_rate_limit_exceeded', reason: 'login in flight: pair' }], 'the security event alone')
})
