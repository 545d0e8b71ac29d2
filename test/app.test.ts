import { METHODS } from 'node:http'
import t from 'tap'
import { assertLoggedIn, build, errorBodies, login, seedAccounts, testDatabases } from './helper.js'

const notFound = { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }
const bodyMissing = { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición es obligatorio' }
/** In place of a body: the seed user's login answer, checked by assertLoggedIn (its token is new each time). */
const LOGGED_IN = Symbol('the seed user logged in')

for (const kind of testDatabases()) {
  t.test(`every API response carries the §4 headers on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const token = await login(app, seedAccounts.user.email, seedAccounts.user.password)
    const { user } = seedAccounts
    const requests = [
      { method: 'POST' as const, url: '/auth/login', payload: { email: user.email, password: user.password }, status: 200, body: LOGGED_IN },
      { method: 'POST' as const, url: '/auth/login', payload: { email: user.email, password: 'Wrong1234' }, status: 401, body: errorBodies.badCredentials },
      { method: 'POST' as const, url: '/auth/signup', payload: { username: 'x' }, status: 400, body: { username: 'El username debe tener entre 3 y 20 caracteres', email: 'El email es obligatorio', password: 'La password es obligatoria' } },
      { method: 'GET' as const, url: '/users/me', headers: { authorization: `Bearer ${token}` }, status: 200, body: { id: user.id, username: user.username, email: user.email, role: user.role } },
      { method: 'GET' as const, url: '/users/me', status: 401, body: { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' } },
      { method: 'GET' as const, url: '/admin/users', headers: { authorization: `Bearer ${token}` }, status: 403, body: { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' } },
      { method: 'GET' as const, url: '/nowhere', headers: { authorization: `Bearer ${token}` }, status: 404, body: notFound },
      { method: 'GET' as const, url: '/auth/nowhere', status: 404, body: notFound }
    ]
    for (const { status, body, ...request } of requests) {
      const response = await app.inject(request)
      const what = `${request.method} ${request.url} → ${status}`
      t.equal(response.statusCode, status, what)
      if (body === LOGGED_IN) assertLoggedIn(t, response, user, what)
      else t.strictSame(response.json(), body, `${what}: body`)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8', what)
      t.equal(response.headers['x-content-type-options'], 'nosniff', what)
      t.equal(response.headers['cache-control'], 'no-store', what)
      t.notOk(response.headers.server, `${what}: no Server header`)
      t.notOk(response.headers['x-powered-by'], `${what}: no X-Powered-By header`)
      t.notOk(response.headers['access-control-allow-origin'], `${what}: no CORS header by default`)
      t.notMatch(response.body, /argon2|password_hash|passwordHash/, `${what}: no hash in the body`)
    }
  })

  t.test(`unknown paths: 401 without a token, 404 with one, 404 under /auth/ on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const token = await login(app, seedAccounts.admin.email, seedAccounts.admin.password)
    const anonymous = await app.inject({ method: 'DELETE', url: '/users/1' })
    t.equal(anonymous.statusCode, 401)
    t.strictSame(anonymous.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
    t.equal(anonymous.headers['www-authenticate'], 'Bearer')
    const known = await app.inject({ method: 'DELETE', url: '/users/1', headers: { authorization: `Bearer ${token}` } })
    t.equal(known.statusCode, 404)
    t.strictSame(known.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
    const auth = await app.inject({ method: 'POST', url: '/auth/refresh', payload: {} })
    t.equal(auth.statusCode, 404)
    t.strictSame(auth.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
    const wrongMethod = await app.inject({ method: 'GET', url: '/auth/login' })
    t.equal(wrongMethod.statusCode, 404)
    t.strictSame(wrongMethod.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
  })

  t.test(`under /auth/ every method Node parses gets 404 without a token, WebDAV's included, on ${kind}`, async (t) => {
    const app = await build(t, kind)
    // CONNECT never reaches a route (plugins/http-edges.ts); HEAD's answer has no body to compare.
    for (const method of METHODS.filter((name) => name !== 'CONNECT' && name !== 'HEAD')) {
      // RFC 10008 refuses a QUERY without a body and its content type (400), whatever its path.
      const response = await app.inject({ method: method as 'GET', url: '/auth/login', ...(method === 'QUERY' ? { payload: {} } : {}) })
      t.equal(response.statusCode, method === 'POST' ? 400 : 404, method)
      t.strictSame(response.json(), method === 'POST' ? bodyMissing : notFound, `${method}: body`)
      const elsewhere = await app.inject({ method: method as 'GET', url: '/nowhere' })
      t.equal(elsewhere.statusCode, 401, `${method} elsewhere`)
      t.strictSame(elsewhere.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }, `${method} elsewhere: body`)
    }
  })
}
