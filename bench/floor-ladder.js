// GET /users/me on the built service, the database-bound ceilings (plain, and batched: the ratios'
// limit) and bench/fastify-floor.js with sets of its parts, all on core 0 over one fresh database,
// loaded in turn from core 1 (32 connections, SPEC's own-info request), the order reversed every
// other round so drift falls on all. Prints each one's requests per second and CPU per answer: the
// mean, the median and the least of its rounds (on a noisy machine the least is the steadiest
// figure of what a request costs), its p99 latency (the median and the most of its rounds), and its
// ratio to the ceiling.
// LADDER_SERVICES='[{"name":"a","dir":"/path/to/build"},…]' loads other builds instead of ./dist
// (each folder with dist, package.json and node_modules, as bench/me-ab.js wants); "env" adds
// variables, "nodeArgs" node options after npm start's (a later V8 option wins).
// Usage: npm run build && node bench/floor-ladder.js [rounds = 10] [seconds = 3] ['["batch", "batch,schema", "batch,schema,log", "batch,schema,log,hooks,uuid"]']
import { randomBytes } from 'node:crypto'
import { createDatabase, median, meLoader, serviceNodeArgs, startDbCeiling, startProcess, startService } from './lib.js'

const [rounds = '10', seconds = '3', floors = '["batch", "batch,schema", "batch,schema,log", "batch,schema,log,hooks,uuid"]'] = process.argv.slice(2)
const services = JSON.parse(process.env.LADDER_SERVICES ?? '[{"name":"service","dir":"."}]')
const database = await createDatabase('ums_ladder')
const secret = randomBytes(36).toString('base64')
const servers = {}
let port = 18720
try {
  // As bench/run.js runs the service: the request line logged, 4 threads.
  for (const { name, dir = '.', env, nodeArgs = [] } of services) servers[name] = await startService({ databaseUrl: database.url, port: port++, env: { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: secret, ...env }, cpu: 0, dir, nodeArgs: [...serviceNodeArgs(), ...nodeArgs] })
  servers['db ceiling'] = await startDbCeiling({ databaseUrl: database.url, secret, port: port++, cpu: 0 })
  servers['batched ceiling'] = await startDbCeiling({ databaseUrl: database.url, secret, port: port++, cpu: 0, env: { CEILING_BATCH: '1' } })
  for (const parts of JSON.parse(floors)) {
    const base = `http://127.0.0.1:${port}`
    const env = { DATABASE_URL: database.url, JWT_SECRET: secret, PORT: String(port++), FLOOR_PARTS: parts }
    servers[`fastify floor [${parts}]`] = { base, ...await startProcess(['taskset', '-c', '0', 'node', ...serviceNodeArgs(), 'bench/fastify-floor.js'], env, `${base}/`) }
  }

  const load = await meLoader(servers[services[0].name].base, { username: 'ladderuser', email: 'ladder-user@example.com', password: 'Bench12345' })
  const names = Object.keys(servers)
  for (const name of names) await load(servers[name], 3)
  const figures = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 0; round < Number(rounds); round++) {
    for (const name of round % 2 ? [...names].reverse() : names) figures[name].push(await load(servers[name], Number(seconds)))
  }
  const mean = (name, field) => figures[name].reduce((sum, f) => sum + f[field], 0) / figures[name].length
  const least = (name) => Math.min(...figures[name].map((f) => f.cpu))
  const ceiling = 'batched ceiling'
  console.log('| server | req/s (mean) | µs CPU an answer: mean / median / least | p99 ms: median / most | rate to the batched ceiling | least CPU, batched ceiling\'s to this |\n|---|---|---|---|---|---|')
  for (const name of names) {
    console.log(`| ${name} | ${mean(name, 'rate').toFixed(0)} | ${mean(name, 'cpu').toFixed(1)} / ${median(figures[name].map((f) => f.cpu)).toFixed(1)} / ${least(name).toFixed(1)} | ${median(figures[name].map((f) => f.p99))} / ${Math.max(...figures[name].map((f) => f.p99))} | ${(mean(name, 'rate') / mean(ceiling, 'rate') * 100).toFixed(1)}% | ${(least(ceiling) / least(name) * 100).toFixed(1)}% |`)
  }
} finally {
  for (const server of Object.values(servers)) await server.stop()
  await database.drop()
}
