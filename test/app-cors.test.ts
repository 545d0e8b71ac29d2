import t from 'tap'
import { assertLoggedIn, build, login, seedAccounts } from './helper.js'

const { user } = seedAccounts
const ORIGIN = 'https://app.example.com'

t.test('without CORS_ORIGINS no response carries CORS headers', async (t) => {
  const app = await build(t, 'pglite')
  const response = await app.inject({ method: 'POST', url: '/auth/login', headers: { origin: ORIGIN }, payload: { email: user.email, password: user.password } })
  assertLoggedIn(t, response, user)
  t.strictSame(Object.keys(response.headers).filter((name) => name.startsWith('access-control-')), [])
})

t.test('with CORS_ORIGINS only the listed origins are allowed, preflight included', async (t) => {
  const app = await build(t, 'pglite', { env: { CORS_ORIGINS: `${ORIGIN}, https://admin.example.com` } })
  const allowed = await app.inject({ method: 'POST', url: '/auth/login', headers: { origin: ORIGIN }, payload: { email: user.email, password: user.password } })
  assertLoggedIn(t, allowed, user)
  t.equal(allowed.headers['access-control-allow-origin'], ORIGIN)

  const other = await app.inject({ method: 'POST', url: '/auth/login', headers: { origin: 'https://evil.example.com' }, payload: { email: user.email, password: user.password } })
  t.strictSame(Object.keys(other.headers).filter((name) => name.startsWith('access-control-')), [], 'an origin not listed gets no CORS header at all')
  assertLoggedIn(t, other, user, 'CORS is the browser\'s check: the server still answers')

  // Browsers send the preflight without the token: it must not meet the 401 of the auth hook.
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/users/me',
    headers: { origin: 'https://admin.example.com', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization, content-type' }
  })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.body, '')
  t.equal(preflight.headers['access-control-allow-origin'], 'https://admin.example.com')

  // @fastify/cors answers OPTIONS on every path with a route of its own: a plain OPTIONS (not a
  // preflight) meets the token check and the 404 there, and still gets the contract's bodies.
  const anonymous = await app.inject({ method: 'OPTIONS', url: '/users/me' })
  t.equal(anonymous.statusCode, 401)
  t.strictSame(anonymous.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
  const token = await login(app, user.email, user.password)
  const known = await app.inject({ method: 'OPTIONS', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
  t.equal(known.statusCode, 404)
  t.strictSame(known.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
  // The same from an allowed origin: not a preflight either, so no text/plain 400 of @fastify/cors.
  const fromOrigin = await app.inject({ method: 'OPTIONS', url: '/users/me', headers: { origin: ORIGIN } })
  t.strictSame([fromOrigin.statusCode, fromOrigin.headers['content-type'], fromOrigin.json()], [401, 'application/json; charset=utf-8', { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }])
  const knownFromOrigin = await app.inject({ method: 'OPTIONS', url: '/nowhere', headers: { origin: ORIGIN, authorization: `Bearer ${token}` } })
  t.strictSame([knownFromOrigin.statusCode, knownFromOrigin.json()], [404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }])
})

t.test('in development the docs page\'s origin is allowed, and no other gets any CORS header', async (t) => {
  const app = await build(t, 'pglite', { env: { MANAGEMENT_PORT: '9090' } })
  const docs = await app.inject({ method: 'POST', url: '/auth/login', headers: { origin: 'http://127.0.0.1:9090' }, payload: { email: user.email, password: user.password } })
  assertLoggedIn(t, docs, user)
  t.strictSame([docs.headers['access-control-allow-origin'], docs.headers['access-control-expose-headers']], ['http://127.0.0.1:9090', 'x-request-id, retry-after, www-authenticate'])
  for (const headers of [{ origin: ORIGIN }, {}]) {
    const response = await app.inject({ method: 'POST', url: '/auth/login', headers, payload: { email: user.email, password: user.password } })
    assertLoggedIn(t, response, user)
    t.strictSame(Object.keys(response.headers).filter((name) => name.startsWith('access-control-')), [], `no CORS header for ${JSON.stringify(headers)}`)
  }
})
