// CPU time per GET /users/me inside one process, through app.inject: no sockets, no load
// generator, so it moves far less from run to run than `npm run bench` (±5% against ±25%
// here) and suits an A/B of a change to the request path. Not a throughput figure: inject
// skips node:http and the socket writes that a real request pays.
// The built app (npm run build), production profile with logs to /dev/null, on a fresh
// PostgreSQL database; 32 requests at a time, ROUNDS rounds of N after a warm-up.
// Usage: npm run build && taskset -c 0 node --max-semi-space-size=8 bench/me-cpu.js [N] [ROUNDS]
import { startInProcessApp } from './lib.js'

const N = Number(process.argv[2] ?? 20_000)
const ROUNDS = Number(process.argv[3] ?? 3)
const CONCURRENCY = 32

const { app, login, token, close } = await startInProcessApp('ums_mecpu')
try {
  // SPEC's own-info request: a JSON body on a GET.
  const me = () => app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify(login) })
  const first = await me()
  if (first.statusCode !== 200) throw new Error(`/users/me answered ${first.statusCode} ${first.body}`)
  const run = async (count) => { for (let i = 0; i < count / CONCURRENCY; i++) await Promise.all(Array.from({ length: CONCURRENCY }, me)) }
  await run(5000)
  for (let round = 1; round <= ROUNDS; round++) {
    const before = process.cpuUsage()
    await run(N)
    const used = process.cpuUsage(before)
    console.log(`round ${round}: ${((used.user + used.system) / N).toFixed(1)} µs of CPU per request (${N} requests)`)
  }
} finally {
  await close()
}
