import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { users } from '../../src/db/schema.js'
import { assertLoggedIn, assertSignedUp, assertTooMany, build, captureLog, redisPrefix, redisSkipReason, TEST_REDIS_URL as REDIS_URL, testDatabases, uniqueUser } from '../helper.js'

const LIMITS_ON = { RATE_LIMITS: 'on' }
const bodyMissing = { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición es obligatorio' }

/** Not limited: the empty body reaches validation and gets its 400. */
function assertServed (t: Test, response: Awaited<ReturnType<App['inject']>>, message: string) {
  t.equal(response.statusCode, 400, message)
  t.strictSame(response.json(), bodyMissing, `${message}: body`)
}

// The limit runs before the body is read, so an empty body (400, no hashing) counts like a sign-up.
const signupRequest = (app: App, remoteAddress: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: '/auth/signup', remoteAddress, headers })

async function spend (t: Test, app: App, count: number, address: string | ((i: number) => string), headers?: Record<string, string>) {
  for (let i = 0; i < count; i++) {
    const remote = typeof address === 'function' ? address(i) : address
    assertServed(t, await signupRequest(app, remote, headers), `request ${i + 1} from ${remote}`)
  }
}

/** 429 with the contract's body and a Retry-After within the minute. */
const assertLimited = (t: Test, response: Awaited<ReturnType<App['inject']>>, message: string) => assertTooMany(t, response, message, 60)

const redisSkip = await redisSkipReason('shared sign-up limit not tested')

for (const kind of testDatabases()) {
  t.test(`sign-up limit (CONTRACT §9) on ${kind}`, async (t) => {
    const log = captureLog()
    const { lines } = log
    const logger = { level: 'info', stream: log.stream }
    const app = await build(t, kind, { env: LIMITS_ON, logger })

    t.test('the 21st sign-up from one address within a minute gets 429 with Retry-After', async (t) => {
      await spend(t, app, 19, '203.0.113.10')
      const user = uniqueUser('rl')
      const twentieth = await app.inject({ method: 'POST', url: '/auth/signup', payload: user, remoteAddress: '203.0.113.10' })
      await assertSignedUp(t, app, twentieth, user, 'the 20th is still served')
      const refused = await app.inject({ method: 'POST', url: '/auth/signup', payload: uniqueUser('rl'), remoteAddress: '203.0.113.10' })
      assertLimited(t, refused, 'the 21st is refused')
      // Retry-After alone, as CONTRACT §9 and the OpenAPI document say: no counters of @fastify/rate-limit's own.
      const counters = (response: { headers: Record<string, unknown> }) => Object.keys(response.headers).filter((name) => name.startsWith('x-ratelimit'))
      t.strictSame([counters(twentieth), counters(refused)], [[], []], 'no x-ratelimit-* headers')
      const otherUser = uniqueUser('rl')
      const other = await app.inject({ method: 'POST', url: '/auth/signup', payload: otherUser, remoteAddress: '203.0.113.11' })
      await assertSignedUp(t, app, other, otherUser, 'another address signs up')
      const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: user.email, password: user.password }, remoteAddress: '203.0.113.10' })
      const [stored] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, user.email))
      assertLoggedIn(t, login, { ...user, id: stored.id }, 'logins from the limited address are not sign-ups')
      const event = lines.find((line) => line.event === 'excess_rate_limit_exceeded')
      t.match(event, { level: 40, event: 'excess_rate_limit_exceeded', reason: 'signup', clientAddress: '203.0.113.10', reqId: String })
    })

    t.test('IPv6 clients share the limit of their /64', async (t) => {
      await spend(t, app, 20, (i) => `2001:db8:5:6::${(i + 1).toString(16)}`)
      assertLimited(t, await signupRequest(app, '2001:db8:5:6:abcd::1'), 'another host of the /64')
      assertServed(t, await signupRequest(app, '2001:db8:5:7::1'), 'the next /64 is not limited')
    })

    t.test('X-Forwarded-For without TRUST_PROXY: ignored for the limit, and a warning at most once a minute', async (t) => {
      await spend(t, app, 20, '203.0.113.12', { 'x-forwarded-for': '198.51.100.1' })
      assertLimited(t, await signupRequest(app, '203.0.113.12', { 'x-forwarded-for': '198.51.100.2' }), 'every forwarded client shares the proxy\'s counter')
      const warnings = lines.filter((line) => /X-Forwarded-For/.test(String(line.msg)))
      t.equal(warnings.length, 1, 'one warning for 21 requests')
      t.match(warnings[0], { level: 40, clientAddress: '203.0.113.12', reqId: String })
    })

    t.test('with TRUST_PROXY the client is the forwarded address', async (t) => {
      const proxied = await build(t, kind, { env: { ...LIMITS_ON, TRUST_PROXY: '10.0.0.1' } })
      await spend(t, proxied, 20, '10.0.0.1', { 'x-forwarded-for': '198.51.100.1' })
      assertLimited(t, await signupRequest(proxied, '10.0.0.1', { 'x-forwarded-for': '198.51.100.1' }), 'the forwarded client is limited')
      assertServed(t, await signupRequest(proxied, '10.0.0.1', { 'x-forwarded-for': '198.51.100.2' }), 'another client behind the same balancer is not')
    })

    t.test('RATE_LIMITS=off: no limit and no rate-limit headers', async (t) => {
      const off = await build(t, kind)
      await spend(t, off, 25, '203.0.113.13')
      const response = await signupRequest(off, '203.0.113.13')
      assertServed(t, response, 'the 26th is served')
      t.notOk(response.headers['x-ratelimit-limit'])
    })

    t.test('with Redis, two instances share the limit', { skip: redisSkip }, async (t) => {
      const limitsKeyPrefix = redisPrefix(t)
      const env = { ...LIMITS_ON, REDIS_URL }
      const first = await build(t, kind, { env, limitsKeyPrefix })
      const second = await build(t, kind, { env, limitsKeyPrefix })
      await spend(t, first, 10, '203.0.113.14')
      await spend(t, second, 10, '203.0.113.14')
      assertLimited(t, await signupRequest(first, '203.0.113.14'), 'the 21st, on either instance')
    })

    t.test('with Redis down, sign-ups are still served', async (t) => {
      const down = await build(t, kind, { env: { ...LIMITS_ON, REDIS_URL: 'redis://127.0.0.1:1' } })
      const account = uniqueUser('rd')
      const response = await down.inject({ method: 'POST', url: '/auth/signup', payload: account, remoteAddress: '203.0.113.15' })
      await assertSignedUp(t, down, response, account, 'served without Redis')
    })
  })
}
