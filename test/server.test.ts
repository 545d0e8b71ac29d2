import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { assertLoggedIn, build, createPostgresDatabase, seedAccounts } from './helper.js'
import { MODULE_LOG, TEST_SECRET, freePort, http, loadedModules, portIsFree, spawnServer, waitFor, waitReady } from './server-process.js'

// Real processes start slowly on a busy two-core machine: more than .taprc's 120 s per file.
t.setTimeout(300_000)

// The real process, over real HTTP: what app.inject cannot show.

// Asked before any test is queued: a top-level await between two t.test calls races the root test's end.
const port8080Free = await portIsFree(8080)

t.test('the development process serves GET /users/me with a JSON body over HTTP', async (t) => {
  const [port, managementPort] = [await freePort(), await freePort()]
  const server = spawnServer(t, { PORT: String(port), MANAGEMENT_PORT: String(managementPort), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitReady(server)
  const { email, password } = seedAccounts.user
  const login = await http(port, 'POST', '/auth/login', { body: { email, password } })
  const token = assertLoggedIn(t, login, seedAccounts.user)
  const me = await http(port, 'GET', '/users/me', { body: { email, password }, headers: { authorization: `Bearer ${token}`, connection: 'keep-alive' } })
  t.equal(me.status, 200)
  t.equal(me.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(me.headers['x-content-type-options'], 'nosniff')
  t.equal(me.headers['cache-control'], 'no-store')
  t.notOk(me.headers.server)
  t.notOk(me.headers['x-powered-by'])
  t.strictSame(me.json(), { id: 2, username: 'user', email, role: 'ROLE_USER' })
  t.equal(me.headers['keep-alive'], 'timeout=65', 'keep-alive outlasts a balancer\'s usual 60 s idle timeout')
  const otherEmail = await http(port, 'GET', '/users/me', { body: { email: 'admin@example.com' }, headers: { authorization: `Bearer ${token}` } })
  t.equal(otherEmail.status, 403, 'the GET body is read: another e-mail is refused')
  t.strictSame(otherEmail.json(), { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' })
  const live = await http(managementPort, 'GET', '/health/live')
  t.equal(live.status, 200)
  t.strictSame(live.json(), { status: 'up' })
  server.child.kill('SIGTERM')
  t.strictSame(await server.exited, { code: 0, signal: null })
})

t.test('without PORT the service listens on 8080', { skip: port8080Free ? false : 'port 8080 is in use on this machine: default-port check skipped' }, async (t) => {
  const server = spawnServer(t, { MANAGEMENT_PORT: 'off', ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitFor(server, 8080, '/users/me', 401)
  const response = await http(8080, 'GET', '/users/me')
  t.equal(response.status, 401)
  t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
  server.child.kill('SIGTERM')
  t.strictSame(await server.exited, { code: 0, signal: null })
})

t.test('each bad configuration stops the process with exit 1 and one line naming the variable', async (t) => {
  const production = { APP_PROFILE: 'production', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', JWT_SECRET: TEST_SECRET }
  // test/config/config.test.ts checks every refusal's message in-process; here the process itself
  // is on trial, once for each kind of refusal: a value that does not parse, a variable missing in
  // production, a production rule, an address rule.
  const cases: [string, Record<string, string>, string][] = [
    ['PORT=abc', { PORT: 'abc' }, 'PORT'],
    ['production without DATABASE_URL', { APP_PROFILE: 'production', JWT_SECRET: TEST_SECRET }, 'DATABASE_URL'],
    ['production with a short JWT_SECRET', { ...production, JWT_SECRET: 'short-secret' }, 'JWT_SECRET'],
    ['TRUST_PROXY=0.0.0.0/0', { TRUST_PROXY: '0.0.0.0/0' }, 'TRUST_PROXY'],
    ['a malformed percent-encoding in DATABASE_URL', { DATABASE_URL: 'postgres://bob:S3cret%ZZ@127.0.0.1:1/none' }, 'DATABASE_URL'],
    // Served from memory, it would lose every sign-up at its next restart.
    ['development with a DATABASE_URL', { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }, 'APP_PROFILE']
  ]
  // The processes exit before opening anything, so several run at once; four at a time
  // keeps a two-core machine responsive for the other test files.
  const queue = [...cases]
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await check(...next)
  }))
  async function check (name: string, env: Record<string, string>, variable: string) {
    const server = spawnServer(t, { MANAGEMENT_PORT: 'off', ...env })
    const exit = await server.exited
    t.strictSame(exit, { code: 1, signal: null }, `${name}: exit 1`)
    const lines = server.stderr().split('\n').filter(Boolean)
    t.equal(lines.length, 1, `${name}: one line`)
    t.match(lines[0], new RegExp(`^Invalid configuration: ${variable} `), `${name}: names ${variable}`)
    t.notMatch(server.stderr(), /\n\s+at /, `${name}: no stack trace`)
    t.equal(server.stdout(), '', `${name}: nothing else printed`)
  }
})

t.test('a port already taken stops the start with exit 1, one line naming the cause, and no stack trace', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { taken.close() })
  const { port } = taken.address() as AddressInfo
  const server = spawnServer(t, { PORT: String(port), MANAGEMENT_PORT: 'off', ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  t.strictSame(await server.exited, { code: 1, signal: null })
  t.strictSame(server.stderr().split('\n').filter(Boolean), [`Cannot listen on PORT: Error EADDRINUSE: listen EADDRINUSE: address already in use 127.0.0.1:${port}`])
  t.notMatch(server.stdout(), /\n\s+at /, 'no stack trace in the log either')
})

t.test('a management port already taken is named as such', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { taken.close() })
  const { port } = taken.address() as AddressInfo
  const server = spawnServer(t, { PORT: String(await freePort()), MANAGEMENT_PORT: String(port), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  t.strictSame(await server.exited, { code: 1, signal: null })
  t.strictSame(server.stderr().split('\n').filter(Boolean), [`Cannot listen on MANAGEMENT_PORT: Error EADDRINUSE: listen EADDRINUSE: address already in use 127.0.0.1:${port}`])
})

t.test('three production instances started at once on one empty PostgreSQL database all serve', { skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: PostgreSQL-only test skipped' }, async (t) => {
  const url = await createPostgresDatabase(t)
  const servers = []
  for (let i = 0; i < 3; i++) {
    const [port, managementPort] = [await freePort(), await freePort()]
    // The first lists the modules it loaded.
    // The third runs without the abuse limits, as a load test would.
    const limits: Record<string, string> = i === 2 ? { RATE_LIMITS: 'off' } : {}
    servers.push(spawnServer(t, { APP_PROFILE: 'production', DATABASE_URL: url, JWT_SECRET: TEST_SECRET, PORT: String(port), MANAGEMENT_PORT: String(managementPort), HOST: '127.0.0.1', SHUTDOWN_DRAIN_MS: '0', LOG_LEVEL: 'warn', ...limits }, i === 0 ? MODULE_LOG : []))
  }
  // Readiness includes "migrations at head": each instance saw the schema complete.
  await Promise.all(servers.map((server) => waitReady(server)))
  const user = { username: 'trio', email: 'trio@example.com', password: 'Secreto123' }
  const created = await http(servers[0].port, 'POST', '/auth/signup', { body: user })
  t.equal(created.status, 201)
  t.strictSame(created.json(), { id: 1, username: 'trio', email: 'trio@example.com' })
  const duplicate = await http(servers[1].port, 'POST', '/auth/signup', { body: user })
  t.equal(duplicate.status, 409)
  t.strictSame(duplicate.json(), { email: 'El email ya está registrado', username: 'El username ya está en uso' })
  const login = await http(servers[2].port, 'POST', '/auth/login', { body: { email: user.email, password: user.password } })
  assertLoggedIn(t, login, { id: 1, username: 'trio', email: 'trio@example.com' })
  for (const server of servers) server.child.kill('SIGTERM')
  for (const server of servers) t.strictSame(await server.exited, { code: 0, signal: null })
  t.equal(servers.map((s) => s.stderr()).join('').split('\n').filter((line) => !line.startsWith('MODULES ')).join(''), '', 'no errors on any instance')
  // An instance that found another migrating says so once, at warn (LOG_LEVEL=warn here); the one
  // without limits says that; nothing else.
  const waiting = 'Waiting for another instance\'s migrations to finish (PostgreSQL advisory lock 727001): the start goes on then'
  const noLimits = 'RATE_LIMITS=off: the abuse limits of CONTRACT §9 are off; for load tests and benchmarks only'
  for (const [i, server] of servers.entries()) {
    const warnings = server.stdout().split('\n').filter((line) => line !== '').map((line) => (JSON.parse(line) as { msg: string }).msg)
    t.strictSame(warnings.filter((msg) => msg !== waiting), i === 2 ? [noLimits] : [], `instance ${i}: no other warning`)
    t.ok(warnings.filter((msg) => msg === waiting).length <= 1, `instance ${i}: the migrations' wait said once at most`)
  }
  const modules = loadedModules(servers[0])
  t.ok(modules.some((url) => url.includes('/postgres/')), 'the list holds what the process loaded')
  // drizzle's PGlite driver imports all of PGlite: only the development profile may load either.
  t.strictSame(modules.filter((url) => /@electric-sql\/pglite|drizzle-orm\/pglite/.test(url)), [], 'nothing of PGlite in production')
})

t.test('the HTTP server has the timeouts of CONTRACT §7', async (t) => {
  const app = await build(t, 'pglite')
  t.strictSame({ request: app.server.requestTimeout, headers: app.server.headersTimeout, keepAlive: app.server.keepAliveTimeout }, { request: 10_000, headers: 5_000, keepAlive: 65_000 })
})
