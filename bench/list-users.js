// Admin listing (issue 5): GET /admin/users over 10^4, 10^5 and 10^6 users on PostgreSQL.
// For each size it starts the built service afresh (production profile), logs in as an admin,
// lists everyone twice, checks the JSON is complete and valid, and records rows per second and
// the server's RSS: idle (after start and login) and peak (VmRSS polled every 10 ms, and VmHWM).
// The contract's target: at 10^6 users the RSS grows by less than 50 MB over idle.
// Usage: npm run build && node bench/list-users.js [sizes, comma-separated]
import http from 'node:http'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import argon2 from 'argon2'
import postgres from 'postgres'
import { ARGON2_COST, createDatabase, postJson, startService } from './lib.js'

const sizes = (process.argv[2] ?? '10000,100000,1000000').split(',').map(Number)
const ADMIN = { username: 'benchadmin', email: 'bench-admin@example.com', password: 'Bench12345' }
const RUNS = 2
const MB = 1024 * 1024
// A port of its own: other bench scripts use lib.js's default.
const port = 20000 + Math.floor(Math.random() * 20000)

/** VmRSS and VmHWM of a process, in bytes. */
function memory (pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kib = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))[1]) * 1024
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') }
}

/** GET with the body kept as raw chunks; resolves with the time to the last byte. */
function fetchListing (base, token) {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const req = http.get(`${base}/admin/users`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks = []
      let firstByteMs
      res.on('data', (chunk) => { firstByteMs ??= performance.now() - started; chunks.push(chunk) })
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body: Buffer.concat(chunks), ms: performance.now() - started, firstByteMs }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

/** The listing must be every user, ordered by id, with exactly the four fields. */
function check (body, expectedRows) {
  const rows = JSON.parse(body.toString('utf8'))
  if (!Array.isArray(rows) || rows.length !== expectedRows) throw new Error(`expected ${expectedRows} rows, got ${rows.length}`)
  let previous = 0
  for (const row of rows) {
    if (Object.keys(row).join() !== 'id,username,email,role') throw new Error(`unexpected fields: ${Object.keys(row)}`)
    if (!(row.id > previous)) throw new Error(`ids out of order at ${row.id}`)
    previous = row.id
  }
}

const database = await createDatabase('ums_bench_list')
const sql = postgres(database.url, { max: 1, onnotice: () => {} })
const results = []
try {
  // A first start applies the migrations; then the table is filled by SQL, which is fast.
  const bootstrap = await startService({ databaseUrl: database.url, port })
  await bootstrap.stop()
  const hash = await argon2.hash(ADMIN.password, { type: argon2.argon2id, ...ARGON2_COST })
  // ASCII lower-case names: each is its own username_key (src/users/user.ts).
  await sql`insert into users (username, username_key, email, password_hash, role) values (${ADMIN.username}, ${ADMIN.username}, ${ADMIN.email}, ${hash}, 'ROLE_ADMIN')`

  let users = 1
  for (const size of sizes) {
    const started = performance.now()
    await sql`
      insert into users (username, username_key, email, password_hash, role)
      select 'user' || g, 'user' || g, 'user' || g || '@example.com', '$argon2id$v=19$m=19456,t=2,p=1$ZmFrZQ$ZmFrZWhhc2g', case when g % 100 = 0 then 'ROLE_ADMIN' else 'ROLE_USER' end
      from generate_series(${users}::int, ${size - 1}::int) as g`
    users = size
    await sql`vacuum analyze users`
    const insertMs = performance.now() - started

    const service = await startService({ databaseUrl: database.url, port })
    try {
      const login = await postJson(service.base, '/auth/login', { email: ADMIN.email, password: ADMIN.password })
      if (login.status !== 200) throw new Error(`login answered ${login.status}`)
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const idle = memory(service.pid).rss
      let peak = idle
      const sampler = setInterval(() => { peak = Math.max(peak, memory(service.pid).rss) }, 10)
      const runs = []
      for (let run = 0; run < RUNS; run++) {
        const response = await fetchListing(service.base, login.body.token)
        if (response.status !== 200 || response.type !== 'application/json; charset=utf-8') throw new Error(`listing answered ${response.status} ${response.type}`)
        check(response.body, size)
        runs.push(response)
      }
      clearInterval(sampler)
      // VmHWM also counts start-up and the login's argon2 memory, so the polled VmRSS is the measure.
      const { hwm } = memory(service.pid)
      const best = runs.reduce((a, b) => (a.ms < b.ms ? a : b))
      results.push({
        users: size,
        insertS: (insertMs / 1000).toFixed(1),
        bodyMB: (best.body.length / MB).toFixed(1),
        firstByteMs: best.firstByteMs.toFixed(0),
        seconds: runs.map((r) => (r.ms / 1000).toFixed(2)).join(' / '),
        rowsPerS: Math.round(size / (best.ms / 1000)),
        idleMB: (idle / MB).toFixed(1),
        peakMB: (peak / MB).toFixed(1),
        growthMB: ((peak - idle) / MB).toFixed(1),
        hwmMB: (hwm / MB).toFixed(1)
      })
      console.error(JSON.stringify(results.at(-1)))
    } finally {
      await service.stop()
    }
  }
} finally {
  await sql.end()
  await database.drop()
}

const header = ['users', 'body MB', 'first byte ms', 'time s (run 1 / run 2)', 'rows/s (best run)', 'idle RSS MB', 'peak RSS MB', 'growth MB', 'VmHWM MB']
console.log(`| ${header.join(' | ')} |`)
console.log(`|${header.map(() => '---').join('|')}|`)
for (const r of results) {
  console.log(`| ${r.users.toLocaleString('en')} | ${r.bodyMB} | ${r.firstByteMs} | ${r.seconds} | ${r.rowsPerS.toLocaleString('en')} | ${r.idleMB} | ${r.peakMB} | ${r.growthMB} | ${r.hwmMB} |`)
}
const largest = results.at(-1)
if (largest && largest.users >= 1_000_000) {
  console.log(`\nTarget (10^6 users, RSS growth < 50 MB): ${Number(largest.growthMB) < 50 ? 'met' : 'NOT met'} (${largest.growthMB} MB)`)
}
