import t from 'tap'
import { buildCheckedApp } from '../openapi/conformance.js'
import { RESPONSE_DEADLINE_MS } from '../../src/plugins/response-deadline.js'
import { openMigratedPglite } from '../../src/db/snapshot.js'
import { seedAccounts, testConfig } from '../helper.js'

// CONTRACT §7: the 10 s backstop covers every phase of a request, the authentication hook's
// account look-up included (a database path that went silent under TLS hung there for 30 s).
// The app's deadline is shortened here; its 10 s is the plugin's default (RESPONSE_DEADLINE_MS).
t.test('a token whose account look-up hangs is answered 503 at the response deadline', async (t) => {
  t.equal(RESPONSE_DEADLINE_MS, 10_000, 'the contract\'s 10 s, unless the app is told otherwise')
  const { database } = await openMigratedPglite()
  t.teardown(() => database.close())
  let stalled = 0
  const hanging = { ...database, usersByIds: (ids: readonly number[]) => stalled++ === 0 ? database.usersByIds(ids) : new Promise<never>(() => {}) }
  const app = await buildCheckedApp(testConfig(), { database: hanging, seed: true, responseDeadlineMs: 1500 })
  t.teardown(() => app.close())
  const { email, password } = seedAccounts.user
  const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email, password } })
  t.equal(login.statusCode, 200)
  const first = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${login.json().token}` } })
  t.equal(first.statusCode, 200, 'served while the database answers')
  t.strictSame(first.json(), { id: seedAccounts.user.id, username: seedAccounts.user.username, email, role: 'ROLE_USER' })

  // inject holds no socket, and the deadline's timer does not keep the process alive by itself.
  const alive = setInterval(() => {}, 1000)
  t.teardown(() => clearInterval(alive))
  const started = Date.now()
  const response = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${login.json().token}` } })
  const waited = Date.now() - started
  t.equal(stalled, 2, 'the look-up was asked for and never answered')
  t.equal(response.statusCode, 503)
  t.equal(response.headers['retry-after'], '1')
  t.strictSame(response.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' })
  t.ok(waited >= 1200 && waited < 2500, `answered after ${waited} ms`)
})
