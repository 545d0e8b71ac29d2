// GET /admin/users on two builds of the service at once, for an A/B of a change to the listing:
// both on core 0 over one fresh PostgreSQL database of 10^4 users (seeded as bench/run.js seeds
// them: an admin and filler, real argon2id hashes), loaded in turn from core 1 (32 connections,
// the admin's token), in the order A B B A A B … so that drift over the run falls on both.
// Prints each round and the means: listings per second and CPU per listing. Run it in both
// orders, as bench/me-ab.js. Each folder needs its own build and node_modules (a link will do).
// Usage: node bench/listing-ab.js <folder A> <folder B> [rounds = 6] [seconds = 5]
// Node's options for either: AB_ARGS_A, AB_ARGS_B (default: npm start's, as bench/run.js).
import { randomBytes } from 'node:crypto'
import argon2 from 'argon2'
import postgres from 'postgres'
import { ARGON2_COST, abRounds, cpuSeconds, createDatabase, postJson, runNode, serviceNodeArgs, startService } from './lib.js'

const [dirA, dirB, rounds = '6', seconds = '5'] = process.argv.slice(2)
if (!dirA || !dirB) throw new Error('usage: node bench/listing-ab.js <folder A> <folder B> [rounds] [seconds]')
const USERS = 10_000
const database = await createDatabase('ums_ab')
// As bench/run.js runs the service: the request line logged (LOG_LEVEL info), 4 threads; one secret for both.
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64') }
const start = (dir, args, port) => startService({ databaseUrl: database.url, port, env, cpu: 0, dir, nodeArgs: args?.split(' ').filter(Boolean) ?? serviceNodeArgs() })
const services = { A: await start(dirA, process.env.AB_ARGS_A, 18710), B: await start(dirB, process.env.AB_ARGS_B, 18711) }
const sql = postgres(database.url, { max: 1, onnotice: () => {} })
try {
  // bench/run.js's seed: ASCII lower-case names (each its own username_key), argon2id at the configured cost.
  const hash = await argon2.hash('Bench12345', { type: argon2.argon2id, ...ARGON2_COST })
  await sql`insert into users (username, username_key, email, password_hash, role) values ('benchadmin', 'benchadmin', 'bench-admin@example.com', ${hash}, 'ROLE_ADMIN')`
  await sql`insert into users (username, username_key, email, password_hash) select 'filler' || g, 'filler' || g, 'filler' || g || '@example.com', ${hash} from generate_series(2, ${USERS}) as g`
  await sql`vacuum analyze users`
  const { body: { token } } = await postJson(services.A.base, '/auth/login', { email: 'bench-admin@example.com', password: 'Bench12345' })
  const headers = { authorization: `Bearer ${token}` }
  const bodies = {}
  for (const name of ['A', 'B']) {
    bodies[name] = await (await fetch(`${services[name].base}/admin/users`, { headers })).text()
    if (JSON.parse(bodies[name]).length !== USERS) throw new Error(`${name} did not list ${USERS} users`)
  }
  console.log(`both list ${USERS} users; bodies ${bodies.A === bodies.B ? 'identical' : `differ (A ${bodies.A.length} B, B ${bodies.B.length} B)`}`)
  const load = async ({ pid, base }, duration) => {
    const before = cpuSeconds(pid)
    const f = await runNode('bench/load.js', [JSON.stringify({ connections: 32, duration, url: `${base}/admin/users`, headers })], { cpu: '1' })
    if (f.non2xx > 0 || f.errors > 0) throw new Error(`${base}: ${f.non2xx} non-2xx answers, ${f.errors} errors`)
    return { rate: f.perSecond, cpu: ((cpuSeconds(pid) - before) / f.ok) * 1e6, p99: f.latency.p99 }
  }
  for (const name of ['A', 'B']) await load(services[name], 3)
  await abRounds(services, load, { rounds: Number(rounds), seconds: Number(seconds), unit: 'listings', digits: 1 })
} finally {
  await sql.end()
  await services.A.stop()
  await services.B.stop()
  await database.drop()
}
