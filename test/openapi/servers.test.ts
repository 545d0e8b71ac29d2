import t from 'tap'
import { ConfigError } from '../../src/config/index.js'
import { apiUrl, docsOrigins } from '../../src/schemas/openapi.js'
import { assertLoggedIn, build, seedAccounts, testConfig } from '../helper.js'

const production = { APP_PROFILE: 'production', DATABASE_URL: 'postgres://u@127.0.0.1/db', JWT_SECRET: 'a-production-secret-of-at-least-32-bytes', ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '2' }

t.test('the document\'s server: PUBLIC_URL, or the API listener\'s own address', async (t) => {
  t.equal(apiUrl(testConfig({ MANAGEMENT_PORT: '9090' })), 'http://127.0.0.1:8080')
  t.equal(apiUrl(testConfig({ PORT: '3000', HOST: '10.1.2.3' })), 'http://10.1.2.3:3000')
  t.equal(apiUrl(testConfig({ HOST: '::1' })), 'http://[::1]:8080')
  t.equal(apiUrl(testConfig(production)), 'http://127.0.0.1:8080', 'a wildcard address is shown as loopback')
  t.equal(apiUrl(testConfig({ ...production, PUBLIC_URL: 'https://api.example.com/' })), 'https://api.example.com', 'no trailing slash')
  t.equal(apiUrl(testConfig({ PUBLIC_URL: 'https://example.com/accounts' })), 'https://example.com/accounts')
  t.throws(() => testConfig({ PUBLIC_URL: 'api.example.com' }), new ConfigError('PUBLIC_URL', 'must be an http:// or https:// URL such as https://api.example.com (got "api.example.com")'))
})

t.test('PUBLIC_URL with a path keeps the routes\' paths whole in the served document', async (t) => {
  const app = await build(t, 'pglite', { env: { PUBLIC_URL: 'https://example.com/users' } })
  const document = app.swagger() as { servers: unknown, paths: Record<string, unknown> }
  t.strictSame(document.servers, [{ url: 'https://example.com/users', description: 'The API listener' }])
  t.strictSame(Object.keys(document.paths), ['/auth/signup', '/auth/login', '/users/me', '/admin/users'])
})

t.test('the docs page\'s origins: the management listener under its loopback names, or its own host', async (t) => {
  t.strictSame(docsOrigins(testConfig({ MANAGEMENT_PORT: '9090' })), ['http://127.0.0.1:9090', 'http://localhost:9090', 'http://[::1]:9090'])
  t.strictSame(docsOrigins(testConfig({ MANAGEMENT_PORT: '9191', MANAGEMENT_HOST: '10.0.0.5' })), ['http://10.0.0.5:9191'])
  t.strictSame(docsOrigins(testConfig({ MANAGEMENT_PORT: 'off' })), [])
})

const preflight = (origin: string) => ({
  method: 'OPTIONS' as const,
  url: '/users/me',
  headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' }
})
const login = { method: 'POST' as const, url: '/auth/login', payload: { email: seedAccounts.user.email, password: seedAccounts.user.password } }
const { user } = seedAccounts

t.test('development: the API allows the docs page\'s origin, and exposes the headers the page shows', async (t) => {
  const app = await build(t, 'pglite', { env: { MANAGEMENT_PORT: '9090' } })
  const allowed = await app.inject(preflight('http://localhost:9090'))
  t.equal(allowed.statusCode, 204)
  t.equal(allowed.body, '')
  t.equal(allowed.headers['access-control-allow-origin'], 'http://localhost:9090')
  const answer = await app.inject({ ...login, headers: { origin: 'http://127.0.0.1:9090' } })
  assertLoggedIn(t, answer, user)
  t.equal(answer.headers['access-control-allow-origin'], 'http://127.0.0.1:9090')
  t.equal(answer.headers['access-control-expose-headers'], 'x-request-id, retry-after, www-authenticate')
  const other = await app.inject({ ...login, headers: { origin: 'http://127.0.0.1:9091' } })
  assertLoggedIn(t, other, user)
  t.notOk(other.headers['access-control-allow-origin'], 'another port is another origin')
})

t.test('production: the docs page\'s origin only when CORS_ORIGINS lists it', async (t) => {
  // The production checks run on the configuration; the app itself runs on the test database.
  const quiet = await build(t, 'pglite', { env: { MANAGEMENT_PORT: '9090', APP_PROFILE: 'production', JWT_SECRET: production.JWT_SECRET, DATABASE_URL: production.DATABASE_URL, ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '2' } })
  const refused = await quiet.inject({ ...login, headers: { origin: 'http://127.0.0.1:9090' } })
  assertLoggedIn(t, refused, user)
  t.strictSame(Object.keys(refused.headers).filter((name) => name.startsWith('access-control-')), [])

  const listed = await build(t, 'pglite', { env: { MANAGEMENT_PORT: '9090', APP_PROFILE: 'production', JWT_SECRET: production.JWT_SECRET, DATABASE_URL: production.DATABASE_URL, ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '2', CORS_ORIGINS: 'https://docs.example.com' } })
  const page = await listed.inject(preflight('https://docs.example.com'))
  t.equal(page.statusCode, 204)
  t.equal(page.body, '')
  t.equal(page.headers['access-control-allow-origin'], 'https://docs.example.com')
})
