// Login flood (issue 4): 500 logins at once must each answer 200, 401 or 503 within 5 s, while
// GET /users/me keeps answering in under 50 ms. Hashing is bounded (HASH_CONCURRENCY running,
// 64 waiting at most 2 s), so the flood turns into fast 503s instead of an endless queue.
// The flood is sent from a worker thread, so the probe's timings are not delayed by the
// generator's own event loop handling 500 responses.
// Usage: npm run build && node bench/login-flood.js [logins]
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import { createDatabase, postJson, startService } from './lib.js'

if (!isMainThread) {
  const { base, logins, account } = workerData
  const agent = new http.Agent({ keepAlive: true, maxSockets: logins + 10 })
  const results = await Promise.all(Array.from({ length: logins }, (_, i) =>
    request(base, agent, 'POST', '/auth/login', { email: account.email, password: i % 2 ? account.password : 'Wrong12345' })))
  agent.destroy()
  parentPort.postMessage(results)
  process.exit(0)
}

const logins = Number(process.argv[2] ?? 500)
const database = await createDatabase()
const service = await startService({ databaseUrl: database.url })
const agent = new http.Agent({ keepAlive: true })

function request (base, agent, method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(`${base}${path}`, { method, agent, headers: { ...(payload ? { 'content-type': 'application/json' } : {}), ...headers } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - start }))
    })
    req.on('error', reject)
    req.end(payload)
  })
}

function percentiles (values) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q) => +sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(1)
  return { meP50Ms: at(0.5), meP95Ms: at(0.95), meP99Ms: at(0.99) }
}

try {
  const account = { username: 'flood', email: 'flood@example.com', password: 'Secreto123' }
  await postJson(service.base, '/auth/signup', account)
  const { body } = await postJson(service.base, '/auth/login', { email: account.email, password: account.password })
  const authorization = `Bearer ${body.token}`

  let flooding = true
  const meLatencies = []
  const probe = (async () => {
    while (flooding) {
      const { status, ms } = await request(service.base, agent, 'GET', '/users/me', undefined, { authorization })
      if (status !== 200) throw new Error(`/users/me answered ${status}`)
      meLatencies.push(ms)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()

  const started = performance.now()
  const flood = new Worker(new URL(import.meta.url), { workerData: { base: service.base, logins, account } })
  const [results] = await Promise.all([new Promise((resolve, reject) => { flood.once('message', resolve); flood.once('error', reject) })])
  const floodMs = performance.now() - started
  flooding = false
  await probe

  const byStatus = {}
  for (const { status } of results) byStatus[status] = (byStatus[status] ?? 0) + 1
  const slowest = Math.max(...results.map((r) => r.ms))
  const unexpected = results.filter((r) => ![200, 401, 503].includes(r.status)).length
  const meMax = Math.max(...meLatencies)
  const summary = {
    logins,
    ...Object.fromEntries(Object.entries(byStatus).map(([status, count]) => [`status ${status}`, count])),
    slowestLoginMs: Math.round(slowest),
    floodMs: Math.round(floodMs),
    meProbes: meLatencies.length,
    meMaxMs: +meMax.toFixed(1),
    ...percentiles(meLatencies)
  }
  console.table([summary])
  console.log(unexpected === 0 && slowest < 5000 ? 'PASS: every login answered 200, 401 or 503 within 5 s' : 'FAIL: a login answered otherwise or after 5 s')
  console.log(meMax < 50 ? 'PASS: every /users/me probe answered under 50 ms' : `FAIL: the slowest /users/me probe took ${meMax.toFixed(0)} ms (p95 ${summary.meP95Ms} ms)`)
} finally {
  agent.destroy()
  await service.stop()
  await database.drop()
}
