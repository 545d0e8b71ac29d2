import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { buildCheckedApp } from '../openapi/conformance.js'
import { loadConfig } from '../../src/config/index.js'
import { buildManagementApp } from '../../src/management/management-app.js'
import { loggerOptions } from '../../src/telemetry/logger.js'
import { assertLoggedIn, assertSignedUp, captureLog, causeChain, createPostgresDatabase, errorBodies } from '../helper.js'
import { TEST_SECRET, freePort, http } from '../server-process.js'
import { createTcpProxy } from '../support/tcp-proxy.js'

// Real processes start slowly on a busy two-core machine: more than .taprc's 120 s per file.
t.setTimeout(300_000)

interface Attempt { username: string, status: number, ms: number, startedAt: number, body: string, retryAfter?: string }

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the outage test needs PostgreSQL'
/** A fresh database, and a URL to it through a TCP proxy the test can cut. */
async function proxiedDatabase (t: Test) {
  const url = new URL(await createPostgresDatabase(t))
  const proxy = await createTcpProxy({ host: url.hostname, port: Number(url.port || 5432) })
  t.teardown(proxy.close)
  const proxied = new URL(url)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(proxy.port)
  return { url, proxy, proxied }
}

// Refused and black-holed connections fail within the 1 s connect and acquire timeouts; sockets that
// go silent (half-open) within the 6 s answer deadline (src/db/connector.ts). The pause (about 4 s)
// is shorter than that deadline: what it held answers, 201 or 503, once it ends.
const SLOWEST_MS = { refuse: 3000, 'black-hole': 3000, 'half-open': 10_000, pause: 10_000 } as const
for (const mode of ['refuse', 'black-hole', 'half-open', 'pause'] as const) t.test(`PostgreSQL cut (${mode}) under a stream of sign-ups and brought back`, { skip }, async (t) => {
  const { url, proxy, proxied } = await proxiedDatabase(t)

  // Production-like: PostgreSQL through the proxy, production argon2 cost; limits off, a stream from one address.
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: proxied.toString(), JWT_SECRET: TEST_SECRET, RATE_LIMITS: 'off', LOG_LEVEL: 'silent', MANAGEMENT_PORT: 'off' })
  const app = await buildCheckedApp(config)
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const management = await buildManagementApp({ api: app, isShuttingDown: () => false })
  t.teardown(() => management.close())

  const attempts: Attempt[] = []
  const origin = Date.now()
  let running = true
  let counter = 0
  async function worker () {
    while (running) {
      const username = `out${counter++}`
      const startedAt = Date.now() - origin
      const answer = await http(port, 'POST', '/auth/signup', { body: { username, email: `${username}@example.com`, password: 'Secreto123' }, timeoutMs: 10_000 })
        .catch((error) => ({ status: 0, body: String(error), headers: {} as Record<string, string> }))
      attempts.push({ username, status: answer.status, ms: Date.now() - origin - startedAt, startedAt, body: answer.body, retryAfter: answer.headers['retry-after'] as string | undefined })
    }
  }
  const workers = Array.from({ length: 4 }, worker)

  await sleep(1500)
  const readyBefore = await management.inject('/health/ready')
  t.equal(readyBefore.statusCode, 200)
  t.strictSame(readyBefore.json(), { status: 'up', database: 'up' })

  const cutAt = Date.now() - origin
  await proxy.cut(mode)
  await sleep(1200)
  const readyDuringCut = await management.inject('/health/ready')
  t.equal(readyDuringCut.statusCode, 503, 'readiness turns 503 while the database is cut')
  t.strictSame(readyDuringCut.json(), { status: 'down', database: 'down' })
  await sleep(1800)

  await proxy.restore()
  const restoredAt = Date.now() - origin
  let recoveredAt: number | undefined
  while (Date.now() - origin < restoredAt + 12_000) {
    recoveredAt = attempts.find((a) => a.status === 201 && a.startedAt >= restoredAt)?.startedAt
    if (recoveredAt !== undefined) break
    await sleep(100)
  }
  await sleep(1000)
  running = false
  await Promise.all(workers)

  const ready = await management.inject('/health/ready')
  t.equal(ready.statusCode, 200, 'readiness is back')
  t.strictSame(ready.json(), { status: 'up', database: 'up' })

  const statuses = attempts.reduce<Record<number, number>>((count, a) => ({ ...count, [a.status]: (count[a.status] ?? 0) + 1 }), {})
  const slowest = Math.max(...attempts.map((a) => a.ms))
  t.comment(`${attempts.length} sign-ups: ${JSON.stringify(statuses)}; slowest ${slowest} ms; cut at ${cutAt} ms, restored at ${restoredAt} ms, first 201 after restore started at ${recoveredAt} ms`)

  // Every name is new: a 409 would be an insert that committed and was sent again, its first answer lost.
  t.strictSame(attempts.filter((a) => ![201, 503].includes(a.status)), [], 'every answer is 201 or 503: never a 409, a 500 or a hang')
  t.strictSame(attempts.filter((a) => a.ms > SLOWEST_MS[mode]), [], `every answer came within ${SLOWEST_MS[mode]} ms`)
  if (mode === 'pause') {
    // A pause shorter than the answer deadline may be ridden out: the queries it held answer when it ends.
    const heldThrough = attempts.some((a) => a.ms >= (restoredAt - cutAt) * 0.75)
    t.ok(statuses[503] > 0 || heldThrough, 'the cut was felt: a 503, or an answer held through the pause')
  } else t.ok(statuses[503] > 0, 'the cut was felt')
  t.ok(attempts.some((a) => a.status === 201 && a.startedAt < cutAt), 'sign-ups succeeded before the cut')
  t.ok(recoveredAt !== undefined && recoveredAt - restoredAt < 10_000, `the same app served again ${recoveredAt! - restoredAt} ms after the database came back`)
  t.strictSame(app.database.poolStats(), { max: 10, inFlight: 0, waiting: 0, acquireTimeouts: app.database.poolStats().acquireTimeouts }, 'nothing left in flight or waiting in the pool')
  const unavailable = attempts.filter((a) => a.status === 503)
  t.strictSame(unavailable.filter((a) => a.body !== JSON.stringify({ statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }) || a.retryAfter !== '1'), [],
    'every 503 is the contract\'s body with Retry-After: 1')

  // No acknowledged sign-up lost: read the database directly, not through the proxy.
  const direct = postgres(url.toString(), { max: 1, onnotice: () => {} })
  const stored = new Set((await direct`select username from users`).map((row) => row.username as string))
  await direct.end()
  const acknowledged = attempts.filter((a) => a.status === 201).map((a) => a.username)
  t.strictSame(acknowledged.filter((username) => !stored.has(username)), [], `all ${acknowledged.length} acknowledged sign-ups are stored`)
})

t.test('a log captured through a database outage holds no hash, parameter, e-mail or SQL', { skip }, async (t) => {
  const { proxy, proxied } = await proxiedDatabase(t)

  // The production logger (serializers, redaction, format), writing into the test.
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: proxied.toString(), JWT_SECRET: TEST_SECRET, RATE_LIMITS: 'off', LOG_LEVEL: 'info', MANAGEMENT_PORT: 'off' })
  const log = captureLog()
  const app = await buildCheckedApp(config, { logger: { ...loggerOptions(config) as object, stream: log.stream } })
  t.teardown(() => app.close())
  await app.ready()

  const known = { username: 'knownperson', email: 'known.person@example.com', password: 'Secreto123' }
  const created = await app.inject({ method: 'POST', url: '/auth/signup', payload: known })
  await assertSignedUp(t, app, created, known)
  const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: known.email, password: known.password } })
  // The id assertSignedUp found stored.
  const token = assertLoggedIn(t, login, { id: created.json().id, username: known.username, email: known.email })

  await proxy.cut('refuse')
  const { unavailable } = errorBodies
  const attempts = [
    { method: 'POST', url: '/auth/signup', payload: { username: 'leakyname', email: 'secret.person@example.com', password: 'Secreto123' } },
    { method: 'POST', url: '/auth/login', payload: { email: 'unknown.person@example.com', password: 'Secreto123' } },
    { method: 'POST', url: '/auth/login', payload: { email: known.email, password: known.password } },
    { method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } }
  ] as const
  for (const attempt of attempts) {
    const response = await app.inject(attempt)
    t.equal(response.statusCode, 503, `${attempt.method} ${attempt.url} during the outage`)
    t.strictSame(response.json(), unavailable)
  }
  await proxy.restore()

  const failures = log.lines.filter((line) => line.msg === 'service unavailable')
  t.equal(failures.length, attempts.length, 'each failure is logged')
  t.ok(failures.every((line) => causeChain(line.cause).some((cause) => typeof cause.code === 'string')), 'by its code')
  const text = log.text()
  t.notMatch(text, '$argon2', 'no password hash')
  t.notMatch(text, 'Secreto123', 'no password')
  t.notMatch(text, 'leakyname', 'no SQL parameter')
  t.notMatch(text, /@example\.com/, 'no e-mail in clear')
  t.notMatch(text, 'Failed query', 'no failed query')
  t.notMatch(text, /insert into|select .* from|"users"/i, 'no SQL text')
})

// With one host, postgres.js fails the query with that host's error; with several it retries until
// the acquire timeout, whose line once said only "no database connection within 1000 ms".
t.test('with several hosts, an outage is logged with the last host\'s failure beside the acquire timeout', { skip }, async (t) => {
  const { url, proxy } = await proxiedDatabase(t)
  const twoHosts = `postgres://${url.username}@127.0.0.1:${proxy.port},127.0.0.1:${await freePort()}${url.pathname}`
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: twoHosts, JWT_SECRET: TEST_SECRET, RATE_LIMITS: 'off', LOG_LEVEL: 'info', MANAGEMENT_PORT: 'off' })
  const log = captureLog()
  const app = await buildCheckedApp(config, { logger: { ...loggerOptions(config) as object, stream: log.stream } })
  t.teardown(() => app.close())
  await app.ready()

  await proxy.cut('refuse')
  const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username: 'twohosts', email: 'two.hosts@example.com', password: 'Secreto123' } })
  t.strictSame([response.statusCode, response.headers['retry-after'], response.json()], [503, '1', { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }])
  const line = log.lines.find((l) => l.msg === 'service unavailable')
  t.strictSame(causeChain(line?.cause).filter((c) => c.code === 'UMS_DB_ACQUIRE_TIMEOUT' || c.code === 'ECONNREFUSED').map((c) => c.code), ['UMS_DB_ACQUIRE_TIMEOUT', 'ECONNREFUSED'])
  t.match(causeChain(line?.cause).find((c) => c.code === 'ECONNREFUSED'), { message: /^connect ECONNREFUSED 127\.0\.0\.1:\d+$/ })
})
