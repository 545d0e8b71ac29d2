import { writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { assertLoggedIn, createPostgresDatabase, seedAccounts } from './helper.js'
import { TEST_SECRET, freePort, http, spawnServer, waitReady, type HttpAnswer } from './server-process.js'
import { until as poll } from './deploy/processes.js'

// Real processes start slowly on a busy two-core machine: more than .taprc's 120 s per file.
t.setTimeout(300_000)

// Real processes and real signals. The request "in flight" is a login whose body is held
// back: the server has its headers (it is routed and counted as active) and waits for the
// rest, which the test sends whenever it chooses. No timing guesswork about how long a
// hash takes on a busy machine.

const refused = (port: number) => http(port, 'GET', '/users/me', { timeoutMs: 2000 }).then(() => false, (error) => error.code === 'ECONNREFUSED')

async function ports () {
  return { PORT: String(await freePort()), MANAGEMENT_PORT: String(await freePort()) }
}

/** The bounds here are a few seconds, so the wait is polled finely. */
const until = (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 5000) => poll(what, check, timeoutMs, 20)

/** A login sent in two halves; `finish()` sends the second. Resolves once the server has the first. */
async function heldLogin (port: number, credentials: { email: string, password: string }) {
  const payload = JSON.stringify(credentials)
  let finish!: () => void
  const answer = new Promise<HttpAnswer>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/auth/login', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) }))
    })
    req.on('error', reject)
    req.write(payload.slice(0, 10))
    finish = () => req.end(payload.slice(10))
  })
  answer.catch(() => {})
  // A request on a later connection answered means the server has accepted and read this one.
  await http(port, 'GET', '/users/me')
  await sleep(50)
  return { answer, finish }
}

const readinessIs = (port: number, status: number) => async () => (await http(port, 'GET', '/health/ready').catch(() => undefined))?.status === status

/** Readiness turns 503 within a second of the signal, saying the API is going down. */
async function assertDraining (t: Test, managementPort: number): Promise<void> {
  const notReadyAfter = await until('readiness 503', readinessIs(managementPort, 503), 1000)
  t.pass(`readiness answered 503 ${notReadyAfter} ms after the signal`)
  const ready = await http(managementPort, 'GET', '/health/ready')
  t.equal(ready.status, 503)
  t.strictSame(ready.json(), { status: 'down', database: 'up', api: 'down' })
}

t.test('development: SIGTERM with a login in flight; the login gets its 200 and the process exits 0', async (t) => {
  const server = spawnServer(t, { ...await ports(), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitReady(server)
  const { email, password } = seedAccounts.user
  const login = await heldLogin(server.port, { email, password })

  server.child.kill('SIGTERM')
  await assertDraining(t, server.managementPort!)
  // No drain in development: the listener closes at once, the held login keeps it waiting.
  await until('API listener closed', () => refused(server.port))
  t.equal(server.child.exitCode, null, 'the process waits for the login in flight')

  login.finish()
  const answer = await login.answer
  assertLoggedIn(t, answer, { id: 2, username: 'user', email })
  t.strictSame(await server.exited, { code: 0, signal: null })
  t.equal(server.stderr(), '')
})

t.test('development: SIGINT shuts down the same way', async (t) => {
  const server = spawnServer(t, { ...await ports(), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitReady(server)
  server.child.kill('SIGINT')
  t.strictSame(await server.exited, { code: 0, signal: null })
  t.ok(await refused(server.port), 'nothing listens any more')
})

// Closing the management listener waited for its idle connections, and a silent one never
// timed out once the listener closed: every shutdown ran into close-with-grace's bound, exit 1,
// with the database never closed.
t.test('SIGTERM with a silent and a half-sent connection on the management port still exits 0', async (t) => {
  const server = spawnServer(t, { ...await ports(), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitReady(server)
  const sockets = [connect(server.managementPort!, '127.0.0.1'), connect(server.managementPort!, '127.0.0.1')]
  t.teardown(() => { for (const socket of sockets) socket.destroy() })
  sockets[0].on('error', () => {})
  sockets[1].on('error', () => {})
  await Promise.all(sockets.map((socket) => new Promise((resolve) => socket.once('connect', resolve))))
  sockets[1].write('GET /health/live HTTP/1.1\r\nHost: x\r\n')
  await sleep(100)
  server.child.kill('SIGTERM')
  t.strictSame(await server.exited, { code: 0, signal: null })
  t.equal(server.stderr(), '')
})

t.test('production on PostgreSQL: not ready at once, serving through the drain, in-flight requests finish, exit 0', { skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: PostgreSQL-only test skipped' }, async (t) => {
  const url = await createPostgresDatabase(t)
  // Long enough that a busy machine's answers still come within it.
  const drainMs = 3000
  const server = spawnServer(t, { ...await ports(), APP_PROFILE: 'production', HOST: '127.0.0.1', DATABASE_URL: url, JWT_SECRET: TEST_SECRET, SHUTDOWN_DRAIN_MS: String(drainMs) })
  await waitReady(server)
  const user = { username: 'drainer', email: 'drainer@example.com', password: 'Secreto123' }
  const created = await http(server.port, 'POST', '/auth/signup', { body: user })
  t.equal(created.status, 201)
  t.strictSame(created.json(), { id: 1, username: 'drainer', email: 'drainer@example.com' })
  const login = await heldLogin(server.port, user)
  const keepAlive = { headers: { connection: 'keep-alive' } }
  t.equal((await http(server.port, 'GET', '/users/me', keepAlive)).headers.connection, 'keep-alive', 'before the signal, connections are kept')

  const signalAt = Date.now()
  server.child.kill('SIGTERM')
  await assertDraining(t, server.managementPort!)
  const live = await http(server.managementPort!, 'GET', '/health/live')
  t.equal(live.status, 200, 'the process is still alive')
  t.strictSame(live.json(), { status: 'up' })
  const duringDrain = await http(server.port, 'GET', '/users/me', keepAlive)
  t.ok(Date.now() - signalAt < drainMs, 'asked within the drain')
  t.equal(duringDrain.status, 401, 'the API keeps serving new connections during the drain')
  t.strictSame(duringDrain.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
  // So the balancer's next request opens a connection, to an instance it still sends to, instead
  // of racing the listener's close on one kept idle here (a POST is not retried).
  t.equal(duringDrain.headers.connection, 'close', 'during the drain every answer closes its connection')

  await until('API listener closed', () => refused(server.port), drainMs + 3000)
  const closedAt = Date.now() - signalAt
  t.ok(closedAt >= drainMs, `the listener was found closed ${closedAt} ms after the signal, not before the ${drainMs} ms drain`)
  t.equal(server.child.exitCode, null, 'the process waits for the login in flight')

  login.finish()
  const answer = await login.answer
  assertLoggedIn(t, answer, { id: 1, username: 'drainer', email: 'drainer@example.com' }, 'the login in flight when the listener closed gets its 200')
  t.strictSame(await server.exited, { code: 0, signal: null })

  const lines = server.stdout().split('\n').filter(Boolean).map((line) => JSON.parse(line))
  t.match(lines.find((l) => l.event === 'sys_startup'), { level: 30, event: 'sys_startup', profile: 'production', time: /Z$/ })
  t.match(lines.find((l) => l.event === 'sys_shutdown'), { event: 'sys_shutdown', reason: 'SIGTERM', drainMs })
  t.ok(lines.some((l) => l.msg === 'shut down'), 'the last step is logged')
  t.equal(server.stderr(), '')
})

t.test('an unhandled rejection is logged and the service goes on; an uncaught exception drains and exits 1', async (t) => {
  const dir = t.testdir({})
  // A preload that misbehaves on request: the test drops a file, the process trips over it.
  const preload = join(dir, 'misbehave.mjs')
  writeFileSync(preload, `
    import { existsSync, rmSync } from 'node:fs'
    const dir = ${JSON.stringify(dir)}
    const timer = setInterval(() => {
      if (existsSync(dir + '/reject')) { rmSync(dir + '/reject'); Promise.reject(new Error('stray rejection for the test')) }
      if (existsSync(dir + '/throw')) { clearInterval(timer); throw new Error('uncaught exception for the test') }
    }, 20)
    timer.unref()
  `)
  const server = spawnServer(t, { ...await ports(), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' }, ['--import', preload])
  await waitReady(server)

  writeFileSync(join(dir, 'reject'), '')
  await until('rejection logged', () => server.stdout().includes('stray rejection for the test'))
  const stillReady = await http(server.managementPort!, 'GET', '/health/ready')
  t.equal(stillReady.status, 200, 'a stray rejection does not stop the service')
  t.strictSame(stillReady.json(), { status: 'up', database: 'up' })

  const { email, password } = seedAccounts.user
  const login = await heldLogin(server.port, { email, password })
  writeFileSync(join(dir, 'throw'), '')
  await until('API listener closed', () => refused(server.port))
  login.finish()
  const answer = await login.answer
  assertLoggedIn(t, answer, { id: 2, username: 'user', email }, 'the login in flight still gets its answer')
  t.strictSame(await server.exited, { code: 1, signal: null })
  t.match(server.stdout(), 'uncaught exception for the test')
})

t.test('SIGTERM while the start waits for the database: one line saying so, and the signal\'s own exit', async (t) => {
  // A database host that takes the connection and never answers holds the start in its connect.
  const connected: Socket[] = []
  const silent = createServer((socket) => { connected.push(socket) })
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { for (const socket of connected) socket.destroy(); silent.close() })
  const server = spawnServer(t, { APP_PROFILE: 'production', DATABASE_URL: `postgres://postgres@127.0.0.1:${(silent.address() as AddressInfo).port}/users`, JWT_SECRET: TEST_SECRET, PORT: String(await freePort()), MANAGEMENT_PORT: 'off' })
  await until('the start connecting', () => connected.length > 0, 60_000)
  server.child.kill('SIGTERM')
  t.strictSame(await server.exited, { code: null, signal: 'SIGTERM' })
  t.strictSame(server.stderr().split('\n').filter(Boolean), ['Stopped by SIGTERM during start, before serving'])
  t.equal(server.stdout(), '')
})
