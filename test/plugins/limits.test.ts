import sensible from '@fastify/sensible'
import Fastify from 'fastify'
import t from 'tap'
import { SIGNUP_LIMIT } from '../../src/limits/policy.js'
import clientAddress from '../../src/plugins/client-address.js'
import errorHandler from '../../src/plugins/error-handler.js'
import limitsRedis from '../../src/plugins/limits-redis.js'
import signupLimit from '../../src/plugins/signup-limit.js'
import { assertTooMany, TEST_REDIS_URL, redisSkipReason, testConfig } from '../helper.js'

const redisSkip = await redisSkipReason()

// The limits' plugins alone, on a bare instance (the routes that use them: test/limits/).
t.test('limits-redis: no Redis without REDIS_URL or with the limits off', async (t) => {
  for (const env of [{ RATE_LIMITS: 'on' }, { RATE_LIMITS: 'off', REDIS_URL: TEST_REDIS_URL }] as Array<Record<string, string>>) {
    const app = Fastify()
    await app.register(limitsRedis, { config: testConfig(env), keyPrefix: 'x:' })
    await app.ready()
    t.strictSame([app.limitsRedis, app.limitsKeyPrefix], [null, 'x:'], JSON.stringify(env))
    await app.close()
  }
})

t.test('limits-redis: a connection with both, closed with the app', { skip: redisSkip }, async (t) => {
  const app = Fastify()
  await app.register(limitsRedis, { config: testConfig({ RATE_LIMITS: 'on', REDIS_URL: TEST_REDIS_URL }) })
  await app.ready()
  t.equal(await app.limitsRedis!.ping(), 'PONG')
  const redis = app.limitsRedis!
  const ended = new Promise<string>((resolve) => { redis.once('end', () => resolve('end')); setTimeout(() => resolve(redis.status), 2000) })
  await app.close()
  t.equal(await ended, 'end', 'closed with the app')
})

t.test('signup-limit: the routes that opt in are limited per address, with the contract\'s 429; the others are not', async (t) => {
  const app = Fastify()
  const config = testConfig({ RATE_LIMITS: 'on' })
  await app.register(sensible)
  await app.register(clientAddress, { config })
  await app.register(limitsRedis, { config, keyPrefix: `t${process.pid}:` })
  await app.register(signupLimit, { config })
  await app.register(errorHandler)
  app.post('/signup', { config: { rateLimit: SIGNUP_LIMIT } }, async () => ({ ok: true }))
  app.post('/other', async () => ({ ok: true }))
  t.teardown(() => app.close())
  const answers = []
  for (let i = 0; i <= SIGNUP_LIMIT.max; i++) answers.push(await app.inject({ method: 'POST', url: '/signup' }))
  t.strictSame(answers.slice(0, -1).map((a) => [a.statusCode, a.json()]), Array(SIGNUP_LIMIT.max).fill([200, { ok: true }]))
  assertTooMany(t, answers.at(-1)!, 'the one past the limit', 60)
  const other = await app.inject({ method: 'POST', url: '/other' })
  t.strictSame([other.statusCode, other.json()], [200, { ok: true }], 'a route that does not opt in is not limited')
  const elsewhere = await app.inject({ method: 'POST', url: '/signup', remoteAddress: '192.0.2.9' })
  t.strictSame([elsewhere.statusCode, elsewhere.json()], [200, { ok: true }], 'another address has its own counter')
})
