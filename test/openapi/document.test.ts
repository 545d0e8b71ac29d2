import { readFile } from 'node:fs/promises'
import t from 'tap'
import { buildManagementApp } from '../../src/management/management-app.js'
import { assertSignedUp, build, login, seedAccounts, uniqueUser } from '../helper.js'
import { DOCUMENT_PATH, generateDocument } from './document.js'

type Json = Record<string, any>

const committed = await readFile(DOCUMENT_PATH, 'utf8')
const document: Json = JSON.parse(committed)
const operation = (path: string, method: string): Json => document.paths[path][method]

t.test('docs/openapi.json is what `npm run openapi` makes of the route schemas now', async (t) => {
  t.equal(await generateDocument(), committed, 'docs/openapi.json is stale: run `npm run openapi` and commit it')
})

t.test('the management listener serves the committed document (default configuration)', async (t) => {
  const api = await build(t, 'pglite')
  const management = await buildManagementApp({ api, isShuttingDown: () => false })
  t.teardown(() => management.close())
  const response = await management.inject('/openapi.json')
  t.equal(response.statusCode, 200)
  t.strictSame(response.json(), document)
})

t.test('each operation: an operationId, its security, exactly the statuses its code paths send', async (t) => {
  const expected: Record<string, [string, string, unknown[], string[]]> = {
    signUp: ['/auth/signup', 'post', [], ['201', '400', '408', '409', '413', '415', '429', '500', '503']],
    logIn: ['/auth/login', 'post', [], ['200', '400', '401', '408', '413', '415', '429', '500', '503']],
    getOwnRecord: ['/users/me', 'get', [{ bearerAuth: [] }], ['200', '400', '401', '403', '408', '413', '415', '500', '503']],
    listUsers: ['/admin/users', 'get', [{ bearerAuth: [] }], ['200', '400', '401', '403', '408', '413', '415', '500', '503']]
  }
  for (const [operationId, [path, method, security, statuses]] of Object.entries(expected)) {
    const op = operation(path, method)
    t.equal(op.operationId, operationId)
    t.strictSame(op.security, security, `${operationId}: security`)
    t.strictSame(Object.keys(op.responses), statuses, `${operationId}: statuses`)
    for (const [status, answer] of Object.entries<Json>(op.responses)) {
      t.not(answer.description, 'Default Response', `${operationId} ${status} says what it means`)
      t.ok(answer.headers['X-Request-Id'], `${operationId} ${status} declares X-Request-Id`)
      const extra = Object.keys(answer.headers).filter((name) => name !== 'X-Request-Id')
      const wanted = status === '429' || status === '503' ? ['Retry-After'] : status === '401' && security.length > 0 ? ['WWW-Authenticate'] : []
      t.strictSame(extra, wanted, `${operationId} ${status}: headers`)
    }
  }
})

t.test('named components, no def-N; HttpError requires its three fields', async (t) => {
  t.strictSame(Object.keys(document.components.schemas), [
    'HttpError', 'FieldErrors', 'DuplicateFields', 'SignupBody', 'LoginBody', 'MeBody', 'SignupResponse', 'LoginResponse', 'UserRecord', 'UserList'
  ])
  t.notMatch(committed, /def-[0-9]/)
  t.strictSame(document.components.schemas.HttpError.required, ['statusCode', 'error', 'message'])
})

t.test('the own-info body of GET /users/me is optional; sign-up and login bodies are required', async (t) => {
  t.strictSame(operation('/users/me', 'get').requestBody, { required: false, content: { 'application/json': { schema: { $ref: '#/components/schemas/MeBody' } } } })
  t.equal(operation('/auth/signup', 'post').requestBody.required, true)
  t.equal(operation('/auth/login', 'post').requestBody.required, true)
  t.notOk(operation('/admin/users', 'get').requestBody, 'the listing takes no body')
})

t.test('the server is the API listener', async (t) => {
  t.strictSame(document.servers, [{ url: 'http://127.0.0.1:8080', description: 'The API listener' }])
})

t.test('the examples are the answers the service gives', async (t) => {
  const app = await build(t, 'pglite')
  const media = (path: string, method: string, status: string): Json => operation(path, method).responses[status].content['application/json']
  const account = uniqueUser('ex')
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', payload: account }), account)

  const duplicate = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...account, username: `${account.username}x`.slice(0, 20) } })
  t.equal(duplicate.statusCode, 409)
  t.strictSame(duplicate.json(), media('/auth/signup', 'post', '409').examples.email.value)

  const wrong = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: account.email, password: 'Wrong1234' } })
  t.equal(wrong.statusCode, 401)
  t.strictSame(wrong.json(), media('/auth/login', 'post', '401').example)

  const missing = await app.inject({ method: 'POST', url: '/auth/signup' })
  t.equal(missing.statusCode, 400)
  t.strictSame(missing.json(), media('/auth/signup', 'post', '400').examples.bodyMissing.value)

  const anonymous = await app.inject({ url: '/users/me' })
  t.equal(anonymous.statusCode, 401)
  t.strictSame(anonymous.json(), media('/users/me', 'get', '401').examples.tokenMissing.value)

  const adminToken = await login(app, seedAccounts.admin.email, seedAccounts.admin.password)
  const forbidden = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${adminToken}` } })
  t.equal(forbidden.statusCode, 403)
  t.strictSame(forbidden.json(), media('/users/me', 'get', '403').example)

  const userToken = await login(app, seedAccounts.user.email, seedAccounts.user.password)
  const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${userToken}` } })
  t.equal(me.statusCode, 200)
  t.strictSame(me.json(), media('/users/me', 'get', '200').example)

  const invalid = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${userToken}` }, payload: { email: 'no' } })
  t.equal(invalid.statusCode, 400)
  t.strictSame(invalid.json(), media('/users/me', 'get', '400').examples.fields.value)

  const users = await app.inject({ url: '/admin/users', headers: { authorization: `Bearer ${adminToken}` } })
  t.equal(users.statusCode, 200)
  t.strictSame(users.json().slice(0, 2), media('/admin/users', 'get', '200').example)

  // GET bodies are parsed on every route, so the listing can refuse one too.
  const admin = { authorization: `Bearer ${adminToken}` }
  const malformed = await app.inject({ url: '/admin/users', headers: { ...admin, 'content-type': 'application/json' }, payload: '{' })
  t.equal(malformed.statusCode, 400)
  t.strictSame(malformed.json(), media('/admin/users', 'get', '400').example)
  const text = await app.inject({ url: '/admin/users', headers: { ...admin, 'content-type': 'text/plain' }, payload: 'hello' })
  t.equal(text.statusCode, 415)
  t.strictSame(text.json(), media('/admin/users', 'get', '415').example)
  const large = await app.inject({ url: '/admin/users', headers: { ...admin, 'content-type': 'application/json' }, payload: JSON.stringify({ pad: 'x'.repeat(17 * 1024) }) })
  t.equal(large.statusCode, 413)
  t.strictSame(large.json(), media('/admin/users', 'get', '413').example)
})
