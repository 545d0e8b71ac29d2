import { randomBytes } from 'node:crypto'
import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config/index.js'
import { users } from '../../src/db/schema.js'
import { loggerOptions } from '../../src/telemetry/logger.js'
import { assertBadCredentials, assertLoggedIn, assertTooMany, build, captureLog, emailHmac, errorBody, loginFrom, seedAccounts, testConfig, testDatabases, uniqueUser } from '../helper.js'

/** CONTRACT §7's e-mail digest, written out here: HMAC-SHA256 of the lower-cased e-mail under the digest key. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const { user, admin } = seedAccounts

/** The production logger's options (JSON, ISO time, redaction), writing to memory. */
function captureProductionLog () {
  const production = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: 'postgres://127.0.0.1/unused', JWT_SECRET: randomBytes(32).toString('hex') })
  const log = captureLog()
  return { text: log.text, logger: { ...(loggerOptions(production) as object), stream: log.stream } }
}

for (const kind of testDatabases()) {
  t.test(`security events (CONTRACT §7) on ${kind}`, async (t) => {
    const log = captureProductionLog()
    const app = await build(t, kind, { env: { RATE_LIMITS: 'on' }, logger: log.logger })
    const digestKey = testConfig().jwt.digestKey
    const lines = () => log.text().trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    const eventsOf = (reqId: string) => lines().filter((line) => line.reqId === reqId && line.event !== undefined)
    /** The request's event lines, whole: the logger's own time, pid and hostname masked, the time checked apart. */
    function assertEvents (t: Test, response: { headers: Record<string, unknown> }, expected: Array<Record<string, unknown> & { event: string }>) {
      const reqId = String(response.headers['x-request-id'])
      const events = eventsOf(reqId)
      for (const line of events) t.match(line.time, ISO_UTC, `${String(line.event)}: ISO-8601 UTC time`)
      t.strictSame(events.map((line) => ({ ...line, time: 'x', pid: 0, hostname: 'x' })),
        expected.map((line) => ({ time: 'x', pid: 0, hostname: 'x', reqId, msg: line.event, ...line })))
    }
    const login = (email: string, password: string, remoteAddress: string) => loginFrom(app, remoteAddress, email, password)

    t.test('a login\'s log holds its events, and neither the password nor the token', async (t) => {
      const ok = await login(user.email, user.password, '203.0.113.70')
      const token = assertLoggedIn(t, ok, user)
      const wrong = await login(user.email, 'Wrong12345', '203.0.113.71')
      assertBadCredentials(t, wrong)
      const unknown = await login('Nadie.Secreto@example.com', 'Otra12345', '203.0.113.72')
      assertBadCredentials(t, unknown)

      assertEvents(t, ok, [{ level: 30, event: 'authn_login_success', clientAddress: '203.0.113.70', userId: user.id }])
      // A known account is named by its id, an unknown e-mail by its HMAC only.
      assertEvents(t, wrong, [{ level: 40, event: 'authn_login_fail', clientAddress: '203.0.113.71', userId: user.id }])
      assertEvents(t, unknown, [{ level: 40, event: 'authn_login_fail', clientAddress: '203.0.113.72', emailHmac: emailHmac(digestKey, 'nadie.secreto@example.com') }])

      const text = log.text()
      t.notMatch(text, /nadie\.secreto/i, 'the unknown e-mail appears only as its HMAC')
      for (const secretText of [user.password, 'Wrong12345', 'Otra12345', token, token.split('.')[2]]) {
        t.notOk(text.includes(secretText), `the log does not hold ${secretText.slice(0, 12)}…`)
      }
    })

    t.test('the 11th failed login logs authn_login_lock', async (t) => {
      for (let i = 0; i < 10; i++) assertBadCredentials(t, await login(user.email, 'Wrong12345', '203.0.113.73'), `failure ${i + 1}`)
      const locked = await login(user.email, user.password, '203.0.113.73')
      assertTooMany(t, locked, 'the 11th')
      assertEvents(t, locked, [{
        level: 40, event: 'authn_login_lock', clientAddress: '203.0.113.73', emailHmac: emailHmac(digestKey, user.email), reason: 'pair', retryAfter: Number(locked.headers['retry-after'])
      }])
      t.notOk(log.text().includes(user.password))
    })

    t.test('sign-up, authorization and validation events', async (t) => {
      const created = uniqueUser('ev')
      const signup = await app.inject({ method: 'POST', url: '/auth/signup', payload: created, remoteAddress: '203.0.113.74' })
      t.equal(signup.statusCode, 201)
      const [stored] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, created.email))
      t.strictSame(signup.json(), { id: stored.id, username: created.username, email: created.email })
      assertEvents(t, signup, [{ level: 30, event: 'user_created', userId: stored.id, clientAddress: '203.0.113.74' }])

      const anonymous = await app.inject({ method: 'GET', url: '/users/me', remoteAddress: '203.0.113.74' })
      t.equal(anonymous.statusCode, 401)
      t.strictSame(anonymous.json(), errorBody(401, 'Unauthorized', 'Token ausente'))
      assertEvents(t, anonymous, [{ level: 40, event: 'authz_fail', clientAddress: '203.0.113.74', statusCode: 401, reason: 'token_missing' }])

      const forged = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: 'Bearer aaa.bbb.ccc' } })
      t.equal(forged.statusCode, 401)
      t.strictSame(forged.json(), errorBody(401, 'Unauthorized', 'Token inválido'))
      assertEvents(t, forged, [{ level: 40, event: 'authz_fail', clientAddress: '127.0.0.1', statusCode: 401, reason: 'token_invalid' }])

      const adminToken = assertLoggedIn(t, await login(admin.email, admin.password, '203.0.113.75'), admin)
      const forbidden = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${adminToken}` } })
      t.equal(forbidden.statusCode, 403)
      t.strictSame(forbidden.json(), errorBody(403, 'Forbidden', 'Acceso denegado'))
      assertEvents(t, forbidden, [{ level: 40, event: 'authz_fail', clientAddress: '127.0.0.1', statusCode: 403, reason: 'role', userId: admin.id }])

      const invalid = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username: 'ab', email: 'bien@example.com', password: 'sinnumerosNi' }, remoteAddress: '203.0.113.76' })
      t.equal(invalid.statusCode, 400)
      t.strictSame(invalid.json(), { username: 'El username debe tener entre 3 y 20 caracteres', password: 'La password debe tener al menos una numero, una letra minuscula y una letra mayuscula' })
      // Field names only.
      assertEvents(t, invalid, [{ level: 40, event: 'input_validation_fail', clientAddress: '203.0.113.76', context: 'body', fields: ['username', 'password'] }])
      t.notMatch(log.text(), /sinnumerosNi|bien@example\.com/, 'no submitted value reaches the log')
    })
  })
}
