// Login flood (issue 4): 500 logins at once must each answer 200, 401 or 503 within 5 s, while
// GET /users/me keeps answering in under 50 ms. Hashing is bounded (HASH_CONCURRENCY running,
// 64 waiting at most 2 s), so the flood turns into fast 503s instead of an endless queue.
// Usage: npm run build && node bench/login-flood.js [logins]
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { createDatabase, postJson, startService } from './lib.js'

const logins = Number(process.argv[2] ?? 500)
const database = await createDatabase()
const service = await startService({ databaseUrl: database.url })
const agent = new http.Agent({ keepAlive: true, maxSockets: logins + 10 })

function request (method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(`${service.base}${path}`, { method, agent, headers: { ...(payload ? { 'content-type': 'application/json' } : {}), ...headers } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - start }))
    })
    req.on('error', reject)
    req.end(payload)
  })
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
      const { status, ms } = await request('GET', '/users/me', undefined, { authorization })
      if (status !== 200) throw new Error(`/users/me answered ${status}`)
      meLatencies.push(ms)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()

  const started = performance.now()
  const results = await Promise.all(Array.from({ length: logins }, (_, i) =>
    request('POST', '/auth/login', { email: account.email, password: i % 2 ? account.password : 'Wrong12345' })))
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
    meP50Ms: +meLatencies.sort((a, b) => a - b)[meLatencies.length >> 1].toFixed(1)
  }
  console.table([summary])
  const pass = unexpected === 0 && slowest < 5000 && meMax < 50
  console.log(pass ? 'PASS: every login answered 200/401/503 within 5 s; /users/me stayed under 50 ms' : 'FAIL')
} finally {
  agent.destroy()
  await service.stop()
  await database.drop()
}
