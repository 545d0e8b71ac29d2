import t from 'tap'
import { buildCheckedApp } from '../openapi/conformance.js'
import { RESPONSE_DEADLINE_MS } from '../../src/plugins/response-deadline.js'
import { openMigratedPglite } from '../../src/db/snapshot.js'
import { captureLog, seedAccounts, testConfig } from '../helper.js'

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

// A listing whose first page came after the deadline's 503 was sent anyway: Fastify then warned
// that the reply was sent, quoting the URL with its query string (an e-mail in it, here).
t.test('a listing whose first page comes after the deadline sends nothing more, and logs no URL', async (t) => {
  const { database } = await openMigratedPglite()
  t.teardown(() => database.close())
  let pages = 0
  const slow: typeof database = { ...database, copyUserPage: async (page, onText) => { pages++; await new Promise((resolve) => setTimeout(resolve, 1500)); return await database.copyUserPage(page, onText) } }
  const log = captureLog()
  const app = await buildCheckedApp(testConfig(), { database: slow, seed: true, responseDeadlineMs: 800, logger: { level: 'info', stream: log.stream } })
  t.teardown(() => app.close())
  const { email, password } = seedAccounts.admin
  const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email, password } })
  t.equal(login.statusCode, 200)
  const alive = setInterval(() => {}, 1000)
  t.teardown(() => clearInterval(alive))
  const response = await app.inject({ method: 'GET', url: '/admin/users?email=carol%40example.com', headers: { authorization: `Bearer ${login.json().token}` } })
  t.equal(response.statusCode, 503)
  t.strictSame(response.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' })
  await new Promise((resolve) => setTimeout(resolve, 2000))
  t.equal(pages, 1, 'no page after the first')
  t.strictSame(log.lines.filter((line) => line.level >= 40).map((line) => line.msg), ['no answer had started at the deadline: answered 503 (the backstop of CONTRACT §7)'])
  t.notMatch(log.text(), /carol|example\.com/, 'nothing of the URL\'s query')
})
