// Where a login's CPU goes beyond the hash: the built service on core 0 (npm start's environment,
// one hash in flight) against the raw argon2 verify rate and the login ceiling (bench/db-ceiling.js:
// bare node:http, the row by e-mail, one verify in flight, the token signed), in alternating
// rounds, with the CPU of each one's main thread and of its pool threads per login and the page
// faults per login (each fault is a page of a freed hash block that glibc gave back and the next
// hash touches again).
// Variants are environments laid over the service's; "UNSET" removes a variable, e.g.
//   node bench/login-cost.js '[{}, {"MALLOC_MMAP_THRESHOLD_":"UNSET","MALLOC_TRIM_THRESHOLD_":"UNSET"}]'
// Options: BENCH_DURATION (seconds per round, default 10), BENCH_ROUNDS (default 2).
import { randomBytes } from 'node:crypto'
import { readdirSync } from 'node:fs'
import argon2 from 'argon2'
import postgres from 'postgres'
import { ARGON2_COST as COST, asNpmStart, createDatabase, cpuSeconds, procStat, rss, runNode, startDbCeiling, startService } from './lib.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 10)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)
const THREADPOOL = '4'
const variants = JSON.parse(process.argv[2] ?? '[{}]')

/** CPU ticks (10 ms) of each thread of `pid`, by thread id. */
const threadTicks = (pid) => new Map(readdirSync(`/proc/${pid}/task`).map((tid) => {
  const fields = procStat(`/proc/${pid}/task/${tid}/stat`)
  return [tid, Number(fields[11]) + Number(fields[12])]
}))
const minorFaults = (pid) => Number(procStat(`/proc/${pid}/stat`)[7])

const database = await createDatabase('ums_login_cost')
const sql = postgres(database.url, { max: 1, onnotice: () => {} })
const services = []
let ceiling
try {
  for (const [i, variant] of variants.entries()) {
    const env = Object.fromEntries(Object.entries(variant).map(([name, value]) => [name, value === 'UNSET' ? undefined : value]))
    services.push(await startService({ databaseUrl: database.url, port: 27000 + i, cpu: 0, env: { UV_THREADPOOL_SIZE: THREADPOOL, HASH_CONCURRENCY: '1', LOG_LEVEL: 'info', ...env } }))
  }
  const login = { email: 'bench-user@example.com', password: 'Bench12345' }
  const hash = await argon2.hash(login.password, { type: argon2.argon2id, ...COST })
  await sql`insert into users (username, username_key, email, password_hash) values ('benchuser', 'benchuser', ${login.email}, ${hash})`
  const loginLoad = (service, duration) => runNode('bench/load.js', [JSON.stringify({ url: `${service.base}/auth/login`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(login), duration })], { cpu: '1' })
  for (const service of services) await loginLoad(service, 3)

  ceiling = await startDbCeiling({ databaseUrl: database.url, secret: randomBytes(36).toString('base64'), port: 27000 + services.length, cpu: 0, ...asNpmStart(THREADPOOL) })
  await loginLoad(ceiling, 3)
  const targets = [...services.map((service, i) => [JSON.stringify(variants[i]), service]), ['login ceiling', ceiling]]

  for (let round = 1; round <= ROUNDS; round++) {
    const raw = await runNode('bench/argon2-rate.js', [JSON.stringify({ mode: 'verify', concurrency: 1, seconds: DURATION, cost: COST })], { cpu: '0', env: { UV_THREADPOOL_SIZE: THREADPOOL } })
    console.log(`round ${round} raw verify: ${raw.perSecond.toFixed(1)}/s, ${(raw.cpuMicrosPerOperation / 1000).toFixed(2)} ms CPU each`)
    for (const [name, target] of targets) {
      const threadsBefore = threadTicks(target.pid)
      const cpuBefore = cpuSeconds(target.pid)
      const faultsBefore = minorFaults(target.pid)
      const result = await loginLoad(target, DURATION)
      const logins = result.ok + result.non2xx
      const threadsAfter = threadTicks(target.pid)
      const perLogin = (ticks) => (ticks * 10 / logins).toFixed(2)
      const main = threadsAfter.get(String(target.pid)) - threadsBefore.get(String(target.pid))
      const others = [...threadsAfter].reduce((sum, [tid, ticks]) => sum + (tid === String(target.pid) ? 0 : ticks - (threadsBefore.get(tid) ?? 0)), 0)
      console.log(`  ${name}: ${result.perSecond.toFixed(1)} logins/s (${(result.perSecond / raw.perSecond * 100).toFixed(1)}% of raw), ` +
        `${((cpuSeconds(target.pid) - cpuBefore) / logins * 1000).toFixed(2)} ms CPU each (main thread ${perLogin(main)}, other threads ${perLogin(others)}), ` +
        `${((minorFaults(target.pid) - faultsBefore) / logins).toFixed(0)} page faults each, non-2xx ${result.non2xx}, RSS ${(rss(target.pid) / 1048576).toFixed(1)} MB`)
    }
  }
} finally {
  for (const service of services) await service.stop()
  await ceiling?.stop()
  await sql.end()
  await database.drop()
}
