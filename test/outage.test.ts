import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import t from 'tap'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { buildManagementApp } from '../src/management/app.js'
import { createPostgresDatabase } from './helper.js'
import { TEST_SECRET, freePort, http } from './server-process.js'

// Real processes start slowly on a busy two-core machine: more than .taprc's 120 s per file.
t.setTimeout(300_000)

type CutMode = 'refuse' | 'black-hole'

/**
 * A TCP proxy in front of PostgreSQL that can be cut: every open socket destroyed, and new
 * connections either refused (nothing listens) or accepted and never answered (a black
 * hole, as when packets are dropped); then restored on the same port.
 */
async function createCuttableProxy (target: { host: string, port: number }) {
  const port = await freePort()
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let blackHole = false
  const listen = () => new Promise<void>((resolve, reject) => {
    server = createServer((client) => {
      sockets.add(client)
      client.on('close', () => sockets.delete(client))
      client.on('error', () => {})
      if (blackHole) return
      const upstream = createConnection(target)
      sockets.add(upstream)
      upstream.on('close', () => sockets.delete(upstream))
      for (const socket of [client, upstream]) socket.on('error', () => { client.destroy(); upstream.destroy() })
      client.pipe(upstream).pipe(client)
    })
    server.once('error', reject).listen(port, '127.0.0.1', resolve)
  })
  await listen()
  return {
    port,
    async cut (mode: CutMode) {
      for (const socket of sockets) socket.destroy()
      if (mode === 'black-hole') {
        blackHole = true
        return
      }
      await new Promise((resolve) => server!.close(resolve))
    },
    async restore () {
      for (const socket of sockets) socket.destroy()
      if (blackHole) blackHole = false
      else await listen()
    },
    close: async () => { for (const socket of sockets) socket.destroy(); if (server?.listening) await new Promise((resolve) => server!.close(resolve)) }
  }
}

interface Attempt { username: string, status: number, ms: number, startedAt: number, body: string, retryAfter?: string }

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the outage test needs PostgreSQL'
for (const mode of ['refuse', 'black-hole'] as const) t.test(`PostgreSQL cut (${mode}) under a stream of sign-ups and brought back`, { skip }, async (t) => {
  const url = new URL(await createPostgresDatabase(t))
  const proxy = await createCuttableProxy({ host: url.hostname, port: Number(url.port || 5432) })
  t.teardown(proxy.close)
  const proxied = new URL(url)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(proxy.port)

  // Production-like: PostgreSQL through the proxy, production argon2 cost; limits off, a stream from one address.
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: proxied.toString(), JWT_SECRET: TEST_SECRET, RATE_LIMITS: 'off', LOG_LEVEL: 'silent', MANAGEMENT_PORT: 'off' })
  const app = await buildApp(config)
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
  while (Date.now() - origin < restoredAt + 15_000) {
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

  t.strictSame(attempts.filter((a) => ![201, 409, 503].includes(a.status)), [], 'every answer is 201, 409 or 503: never a 500, never a hang')
  t.strictSame(attempts.filter((a) => a.ms > 2000), [], 'every answer came within 2 s')
  t.ok(statuses[503] > 0, 'the cut was felt')
  t.ok(attempts.some((a) => a.status === 201 && a.startedAt < cutAt), 'sign-ups succeeded before the cut')
  t.ok(recoveredAt !== undefined && recoveredAt - restoredAt < 15_000, `the same app served again ${recoveredAt! - restoredAt} ms after the database came back`)
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
