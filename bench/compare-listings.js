// Listing designs side by side (issue 13): GET /admin/users over 10^4 users with 32 concurrent
// listings, each design served by bench/db-ceiling.js (same token check and look-up) on core 0,
// autocannon on core 1, in rounds with the database-bound ceiling itself (`select … order by
// id` + JSON.stringify), each round in a new order. A design's ratio is the median over the
// rounds of its figure over the ceiling's in the same round: on a machine shared with other
// work, rates drift by 2× within minutes. Every design must list what the ceiling lists. With --scale, also the peak RSS of one listing at a time at 10^4 and 10^6 users
// (a fresh process per size, VmRSS polled every 10 ms), for --scale-designs (default copy-5000).
// BENCH_NODE_ARGS (e.g. "--max-semi-space-size=1") is given to every server's node.
// Usage: npm run build && node bench/compare-listings.js [--designs=a,b] [--scale] [--scale-designs=a,b]
import http from 'node:http'
import { randomBytes, randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { drizzle } from 'drizzle-orm/postgres-js'
import { migrate } from 'drizzle-orm/postgres-js/migrator'
import { ceilingSigner, cpuSeconds, createDatabase, rss, runNode, startDbCeiling } from './lib.js'
import { designs } from './listing-designs.js'

const option = (name) => process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3).split(',')
const chosen = option('designs') ?? Object.keys(designs)
const scaleDesigns = process.argv.some((arg) => arg.startsWith('--scale')) ? option('scale-designs') ?? ['copy-5000'] : []
const USERS = 10_000
const DURATION = Number(process.env.BENCH_DURATION ?? 10)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const MB = 1024 * 1024
const secret = randomBytes(36).toString('base64')
const basePort = 20000 + Math.floor(Math.random() * 20000)
const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []
const log = (line) => process.stderr.write(`[listings] ${line}\n`)
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]

/** GET the listing; resolves with status, body bytes and time. */
function list (base, token) {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    http.get(`${base}/admin/users`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks = []
      res.on('data', (chunk) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks), ms: performance.now() - started }))
      res.on('error', reject)
    }).on('error', reject)
  })
}

async function fill (sql, from, to) {
  await sql`insert into users (username, email, password_hash)
    select 'filler' || g, 'filler' || g || '@example.com', '$argon2id$v=19$m=19456,t=2,p=1$ZmFrZQ$ZmFrZWhhc2g'
    from generate_series(${from}::int, ${to}::int) as g`
  await sql`vacuum analyze users`
}

const database = await createDatabase('ums_listing')
const sql = postgres(database.url, { max: 1, onnotice: () => {} })
const servers = {}
const output = []
try {
  await migrate(drizzle({ client: sql }), { migrationsFolder: fileURLToPath(new URL('../drizzle', import.meta.url)) })
  await sql`insert into users (username, email, password_hash, role) values ('benchadmin', 'bench-admin@example.com', 'x', 'ROLE_ADMIN')`
  await fill(sql, 2, USERS)
  const token = ceilingSigner({ JWT_SECRET: secret })({ sub: 'bench-admin@example.com', role: 'ROLE_ADMIN', uid: 1, jti: randomUUID() })

  const names = ['ceiling', ...chosen]
  for (const [i, name] of names.entries()) {
    servers[name] = await startDbCeiling({ databaseUrl: database.url, secret, port: basePort + i, cpu: 0, design: name === 'ceiling' ? undefined : name, nodeArgs })
  }
  const reference = await list(servers.ceiling.base, token)
  if (reference.status !== 200 || JSON.parse(reference.body).length !== USERS) throw new Error(`the ceiling answered ${reference.status}`)
  for (const name of chosen) {
    const { status, body } = await list(servers[name].base, token)
    // The same rows in the same order (json_build_object writes its own spacing).
    if (status !== 200 || JSON.stringify(JSON.parse(body)) !== reference.body.toString()) throw new Error(`${name} answered ${status}, a listing that differs from the ceiling's`)
  }
  log(`${names.length} servers on core 0, every listing the ceiling's (${reference.body.length} bytes); warm-up 3 s each`)

  const load = (name, duration) => runNode('bench/load.js', [JSON.stringify({ url: `${servers[name].base}/admin/users`, headers: { authorization: `Bearer ${token}` }, connections: 32, duration })], { cpu: '1' })
  for (const name of names) await load(name, 3)
  const rounds = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const name of [...names].sort(() => Math.random() - 0.5)) {
      const before = cpuSeconds(servers[name].pid)
      const result = await load(name, DURATION)
      result.cpuMs = ((cpuSeconds(servers[name].pid) - before) / (result.ok + result.non2xx)) * 1000
      rounds[name].push(result)
      log(`round ${round} ${name}: ${result.perSecond.toFixed(1)} listings/s, ${result.cpuMs.toFixed(2)} ms CPU each, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}, errors ${result.errors}`)
    }
  }
  // Per round: the design against the ceiling measured minutes apart at most.
  const perRound = (name, pick) => rounds[name].map((r, i) => pick(r, rounds.ceiling[i]))
  output.push(`${USERS.toLocaleString('en')} users, 32 connections × ${DURATION} s × ${ROUNDS} rounds, each server on core 0${nodeArgs.length ? ` (node ${nodeArgs.join(' ')})` : ''}, autocannon on core 1; medians over the rounds`, '',
    '| design | listings/s (each round) | ratio to the ceiling | CPU per listing | ceiling CPU / design CPU | p99 |', '|---|---|---|---|---|---|')
  for (const name of names) {
    const ratio = median(perRound(name, (r, c) => r.perSecond / c.perSecond))
    const cpuRatio = median(perRound(name, (r, c) => c.cpuMs / r.cpuMs))
    output.push(`| ${name} | ${median(rounds[name].map((r) => r.perSecond)).toFixed(1)} (${rounds[name].map((r) => r.perSecond.toFixed(1)).join(' / ')}) | ${ratio.toFixed(2)} | ${median(rounds[name].map((r) => r.cpuMs)).toFixed(2)} ms | ${cpuRatio.toFixed(2)} | ${median(rounds[name].map((r) => r.latency.p99))} ms |`)
  }
  for (const server of Object.values(servers)) await server.stop()

  if (scaleDesigns.length) {
    output.push('', '| design | users | listing s (run 1 / run 2) | idle RSS MB | peak RSS MB |', '|---|---|---|---|---|')
    const peaks = {}
    let users = USERS
    for (const size of [10_000, 1_000_000]) {
      if (size > users) { await fill(sql, users + 1, size); users = size }
      for (const [i, name] of scaleDesigns.entries()) {
        const server = await startDbCeiling({ databaseUrl: database.url, secret, port: basePort + 50 + i, design: name, nodeArgs })
        try {
          await list(server.base, token).then(() => new Promise((resolve) => setTimeout(resolve, 1000)))
          const idle = rss(server.pid)
          let peak = idle
          const sampler = setInterval(() => { peak = Math.max(peak, rss(server.pid)) }, 10)
          const times = []
          for (let run = 0; run < 2; run++) {
            const { status, body, ms } = await list(server.base, token)
            if (status !== 200 || JSON.parse(body).length !== size) throw new Error(`${name} at ${size}: ${status}, ${body.length} bytes`)
            times.push((ms / 1000).toFixed(2))
          }
          clearInterval(sampler)
          ;(peaks[name] ??= {})[size] = peak
          output.push(`| ${name} | ${size.toLocaleString('en')} | ${times.join(' / ')} | ${(idle / MB).toFixed(1)} | ${(peak / MB).toFixed(1)} |`)
          log(output.at(-1))
        } finally {
          await server.stop()
        }
      }
    }
    // json-agg-5000 is the service's listing, which forces a collection (issue 5); the others never do.
    for (const [name, peak] of Object.entries(peaks)) output.push('', `${name}: peak RSS at 10^6 users ${((peak[1_000_000] - peak[10_000]) / MB).toFixed(1)} MB above the peak at 10^4 (target ≤ 20 MB${name === 'json-agg-5000' ? '; forced GC' : ', no forced GC'})`)
  }
} finally {
  for (const server of Object.values(servers)) await server.stop()
  await sql.end()
  await database.drop()
}
console.log(output.join('\n'))
