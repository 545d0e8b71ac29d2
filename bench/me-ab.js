// GET /users/me on two builds of the service at once, for an A/B of a change to the request
// path: both on core 0 over one fresh PostgreSQL database, loaded in turn from core 1 (32
// connections, SPEC's own-info request), in the order A B B A A B … so that drift over the run
// falls on both. Prints each round and the means: requests per second and CPU per answer.
// Run it in both orders: with the same build on both sides, B (started second) measured up to
// 16% slower than A on the 2-core machine of BENCHMARKS.md.
// Each folder needs its own build (npm run build) and node_modules (a link will do).
// Usage: node bench/me-ab.js <folder A> <folder B> [rounds = 6] [seconds = 5]
// Node's options for either: AB_ARGS_A, AB_ARGS_B (default: npm start's --max-semi-space-size=4).
import { randomBytes } from 'node:crypto'
import { createDatabase, cpuSeconds, postJson, runNode, startProcess } from './lib.js'

const [dirA, dirB, rounds = '6', seconds = '5'] = process.argv.slice(2)
if (!dirA || !dirB) throw new Error('usage: node bench/me-ab.js <folder A> <folder B> [rounds] [seconds]')
const nodeArgs = (value) => (value ?? '--max-semi-space-size=4').split(' ').filter(Boolean)
const database = await createDatabase('ums_ab')
const env = {
  APP_PROFILE: 'production',
  DATABASE_URL: database.url,
  HOST: '127.0.0.1',
  MANAGEMENT_PORT: 'off',
  RATE_LIMITS: 'off',
  JWT_SECRET: randomBytes(36).toString('base64'),
  UV_THREADPOOL_SIZE: '4',
  MALLOC_ARENA_MAX: '1',
  SHUTDOWN_DRAIN_MS: '0'
}
const start = (dir, args, port) => startProcess(['taskset', '-c', '0', 'node', ...nodeArgs(args), `${dir}/dist/server.js`], { ...env, PORT: String(port) }, `http://127.0.0.1:${port}/auth/x`)
const services = { A: { ...await start(dirA, process.env.AB_ARGS_A, 18700), port: 18700 }, B: { ...await start(dirB, process.env.AB_ARGS_B, 18701), port: 18701 } }
try {
  const user = { username: 'abuser', email: 'ab-user@example.com', password: 'Bench12345' }
  await postJson('http://127.0.0.1:18700', '/auth/signup', user)
  const { body: { token } } = await postJson('http://127.0.0.1:18700', '/auth/login', { email: user.email, password: user.password })
  const load = async ({ pid, port }, duration) => {
    const before = cpuSeconds(pid)
    const f = await runNode('bench/load.js', [JSON.stringify({
      connections: 32, duration, url: `http://127.0.0.1:${port}/users/me`, method: 'GET',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password })
    })], { cpu: '1' })
    if (f.non2xx > 0 || f.errors > 0) throw new Error(`port ${port}: ${f.non2xx} non-2xx answers, ${f.errors} errors`)
    return { rate: f.perSecond, cpu: ((cpuSeconds(pid) - before) / f.ok) * 1e6, p99: f.latency.p99 }
  }
  await load(services.A, 3)
  await load(services.B, 3)
  const figures = { A: [], B: [] }
  for (let round = 0; round < Number(rounds); round++) {
    for (const name of round % 2 ? ['B', 'A'] : ['A', 'B']) {
      const f = await load(services[name], Number(seconds))
      figures[name].push(f)
      console.log(`${name}: ${f.rate.toFixed(0)} req/s, ${f.cpu.toFixed(1)} µs CPU each, p99 ${f.p99} ms`)
    }
  }
  const mean = (name, field) => figures[name].reduce((sum, f) => sum + f[field], 0) / figures[name].length
  console.log(`A ${mean('A', 'rate').toFixed(0)} req/s, ${mean('A', 'cpu').toFixed(1)} µs | B ${mean('B', 'rate').toFixed(0)} req/s, ${mean('B', 'cpu').toFixed(1)} µs | B/A: rate ${(mean('B', 'rate') / mean('A', 'rate')).toFixed(3)}, CPU per answer ${(mean('B', 'cpu') / mean('A', 'cpu')).toFixed(3)}`)
} finally {
  await services.A.stop()
  await services.B.stop()
  await database.drop()
}
