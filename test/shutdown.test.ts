import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { createPostgresDatabase, seedAccounts } from './helper.js'
import { TEST_SECRET, freePort, http, spawnServer, waitReady, type ServerProcess } from './server-process.js'

// Real processes and real signals. A login is made slow on purpose (argon2 with many
// iterations) so that it is surely in flight when the signal arrives.

const refused = (port: number) => http(port, 'GET', '/users/me', { timeoutMs: 2000 }).then(() => false, (error) => error.code === 'ECONNREFUSED')

async function ports () {
  return { PORT: String(await freePort()), MANAGEMENT_PORT: String(await freePort()) }
}

async function signUpAndLogin (server: ServerProcess, user: { username: string, email: string, password: string }) {
  const created = await http(server.port, 'POST', '/auth/signup', { body: user })
  if (created.status !== 201) throw new Error(`sign-up failed: ${created.status} ${created.body}`)
  return () => http(server.port, 'POST', '/auth/login', { body: { email: user.email, password: user.password } })
}

t.test('development: SIGTERM with a login in flight; the login gets its 200 and the process exits 0', async (t) => {
  const server = spawnServer(t, { ...await ports(), ARGON2_ITERATIONS: '60' })
  await waitReady(server)
  const { email, password } = seedAccounts.user
  const started = Date.now()
  const login = http(server.port, 'POST', '/auth/login', { body: { email, password } }).then((answer) => ({ answer, at: Date.now() - started }))
  await sleep(150)
  server.child.kill('SIGTERM')
  const signalAt = Date.now() - started
  const ready = await http(server.managementPort!, 'GET', '/health/ready')
  t.equal(ready.status, 503, 'readiness turns 503 at once')
  t.same(ready.json(), { status: 'down', database: 'up', api: 'down' })

  const { answer, at } = await login
  t.ok(at > signalAt, `the login answered ${at - signalAt} ms after the signal`)
  t.equal(answer.status, 200)
  t.same({ ...answer.json(), token: 'x' }, { id: 2, token: 'x', username: 'user', email })
  t.same(await server.exited, { code: 0, signal: null })
  t.ok(await refused(server.port), 'nothing listens any more')
  t.equal(server.stderr(), '')
})

t.test('development: SIGINT shuts down the same way', async (t) => {
  const server = spawnServer(t, { ...await ports(), ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1' })
  await waitReady(server)
  server.child.kill('SIGINT')
  t.same(await server.exited, { code: 0, signal: null })
})

t.test('production on PostgreSQL: not ready at once, serving through the drain, in-flight requests finish, exit 0', { skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: PostgreSQL-only test skipped' }, async (t) => {
  const url = await createPostgresDatabase(t)
  const server = spawnServer(t, {
    ...await ports(),
    APP_PROFILE: 'production',
    HOST: '127.0.0.1',
    DATABASE_URL: url,
    JWT_SECRET: TEST_SECRET,
    ARGON2_ITERATIONS: '100',
    SHUTDOWN_DRAIN_MS: '2000'
  })
  await waitReady(server)
  const login = await signUpAndLogin(server, { username: 'drainer', email: 'drainer@example.com', password: 'Secreto123' })
  const started = Date.now()
  server.child.kill('SIGTERM')

  const ready = await http(server.managementPort!, 'GET', '/health/ready')
  t.equal(ready.status, 503, 'readiness turns 503 at once')
  t.same(ready.json(), { status: 'down', database: 'up', api: 'down' })
  const live = await http(server.managementPort!, 'GET', '/health/live')
  t.equal(live.status, 200, 'the process is still alive')

  await sleep(300)
  const duringDrain = await login()
  t.equal(duringDrain.status, 200, 'the API keeps serving new connections during the drain')

  await sleep(Math.max(0, 1500 - (Date.now() - started)))
  // Sent just before the drain ends, answered after the listener closed.
  const inFlight = login().then((answer) => ({ answer, at: Date.now() - started }))
  await sleep(Math.max(0, 2300 - (Date.now() - started)))
  t.ok(await refused(server.port), 'after the drain no new connection is accepted')

  const { answer, at } = await inFlight
  t.ok(at > 2000, `the in-flight login answered at ${at} ms, after the listener closed at 2000 ms`)
  t.equal(answer.status, 200)
  t.same(await server.exited, { code: 0, signal: null })

  const lines = server.stdout().split('\n').filter(Boolean).map((line) => JSON.parse(line))
  t.match(lines.find((l) => l.event === 'sys_startup'), { level: 30, event: 'sys_startup', profile: 'production', time: /Z$/ })
  t.match(lines.find((l) => l.event === 'sys_shutdown'), { event: 'sys_shutdown', reason: 'SIGTERM', drainMs: 2000 })
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
  const server = spawnServer(t, { ...await ports(), ARGON2_ITERATIONS: '60' }, ['--import', preload])
  await waitReady(server)

  writeFileSync(join(dir, 'reject'), '')
  await sleep(300)
  const stillReady = await http(server.managementPort!, 'GET', '/health/ready')
  t.equal(stillReady.status, 200, 'a stray rejection does not stop the service')
  t.same(stillReady.json(), { status: 'up', database: 'up' })

  const { email, password } = seedAccounts.user
  const login = http(server.port, 'POST', '/auth/login', { body: { email, password } })
  await sleep(100)
  writeFileSync(join(dir, 'throw'), '')
  const answer = await login
  t.equal(answer.status, 200, 'the login in flight still gets its answer')
  t.same(await server.exited, { code: 1, signal: null })
  t.match(server.stdout(), 'stray rejection for the test')
  t.match(server.stdout(), 'uncaught exception for the test')
})
