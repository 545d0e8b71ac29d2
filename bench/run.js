// npm run bench: the service against this machine's own limits, every figure with its ratio.
// The built service runs in the production profile on a fresh PostgreSQL database, pinned to
// core 0; autocannon runs in a separate process pinned to core 1. Each scenario and its limits
// alternate over two rounds of 32 connections × 10 s. RATE_LIMITS=off: this is a load test.
// Three ceilings on the service's core: bench/ceiling.js (node:http answering from memory),
// bench/db-ceiling.js (node:http doing only the essential work on the same database, issue 13)
// and the same batched (one statement for the look-ups of a turn, issue 25; the honest limit).
// Login and sign-up are measured against raw argon2 and, in rounds of their own, against the
// same script's POST /auth/login and /auth/signup (a login or sign-up over HTTP and a database).
// Each load's CPU time and RSS (sampled every 100 ms) are kept; CPU-seconds per 1,000 answers size a deployment.
// Prints a table and writes bench/results.json. Options: --quick (skip the 10^5/10^6 listing),
// --profile (the service and both database-bound ceilings under `node --cpu-prof`, bench/*.cpuprofile).
import { spawn } from 'node:child_process'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import http from 'node:http'
import { existsSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, totalmem, release } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import argon2 from 'argon2'
import postgres from 'postgres'
import { startOtlpSink } from './otlp-sink.js'
import { ARGON2_COST as COST, asNpmStart, ceilingVerifier, cpuSeconds, createDatabase, rss, rssParts, runNode, serviceNodeArgs, serviceStartEnv, startDbCeiling, startProcess, underRssWatch } from './lib.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const flags = new Set(process.argv.slice(2))
// --only=me,ceiling runs just those scenarios (for profiling) and stops before the summary.
const only = [...flags].find((f) => f.startsWith('--only='))?.slice(7).split(',')
const CONNECTIONS = 32
const DURATION = Number(process.env.BENCH_DURATION ?? 10)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)
const SERVICE_CPU = '0'
const LOAD_CPU = '1'
// Set here because it cannot be set reliably from inside the process; the raw argon2 rate uses the same.
const THREADPOOL = process.env.UV_THREADPOOL_SIZE ?? '4'
// One hash in flight, the service's own default on its one core (availableParallelism() under
// taskset), and so in the raw rate it is compared with. The login's look-up and the sign-up's
// insert run outside the hashing slot, so the core does not idle while PostgreSQL answers.
const HASH_CONCURRENCY = process.env.BENCH_HASH_CONCURRENCY ?? '1'
const LIST_USERS = 10_000
const port = 20000 + Math.floor(Math.random() * 20000)
const ceilingPort = port + 1
// port + 2 and + 3 are the development start-up's.
const dbCeilingBase = `http://127.0.0.1:${port + 4}`
const batchedBase = `http://127.0.0.1:${port + 6}`
const tracedBase = `http://127.0.0.1:${port + 7}`
const argon2CeilingBase = `http://127.0.0.1:${port + 8}`
const MB = 1024 * 1024

const log = (line) => process.stderr.write(`[bench] ${line}\n`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length

const load = (spec) => runNode('bench/load.js', [JSON.stringify({ connections: CONNECTIONS, duration: DURATION, ...spec })], { cpu: LOAD_CPU })
const rawArgon2 = (mode) => runNode('bench/argon2-rate.js', [JSON.stringify({ mode, concurrency: Number(HASH_CONCURRENCY), seconds: DURATION, cost: COST })], { cpu: SERVICE_CPU, env: { UV_THREADPOOL_SIZE: THREADPOOL } })

/** One request over node:http (fetch refuses a body on GET, which SPEC's own-info request has). */
function request (base, method, path, { body, token } = {}) {
  const payload = body ? JSON.stringify(body) : undefined
  const headers = { ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) }
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers }, (res) => {
      const chunks = []
      res.on('data', (chunk) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(payload)
  })
}

/** Development start-up: `node dist/server.js` in the development profile to its first answer. */
async function devStartup () {
  const { defaultCacheDirs, migrationsHash, snapshotFileName } = await import('../dist/db/snapshot.js')
  const name = snapshotFileName(await migrationsHash())
  const startOnce = async () => {
    const devPort = port + 2
    const service = await startProcess(['node', 'dist/server.js'], { APP_PROFILE: 'development', PORT: String(devPort), MANAGEMENT_PORT: String(devPort + 1), UV_THREADPOOL_SIZE: THREADPOOL }, `http://127.0.0.1:${devPort}/auth/x`)
    await service.stop()
    return service.startMs
  }
  // The first start after a change to drizzle/ (or a fresh clone) builds the snapshot.
  for (const dir of defaultCacheDirs) rmSync(join(dir, name), { force: true })
  const cold = await startOnce()
  const warm = []
  for (let i = 0; i < 5; i++) warm.push(await startOnce())
  return { firstStartMs: cold, warmStartsMs: warm, medianMs: [...warm].sort((a, b) => a - b)[2] }
}

/** Issue 5's bench/list-users.js, when present: rows/s and peak RSS at 10^4, 10^5 and 10^6 users. */
async function listingAtScale () {
  if (!existsSync(join(root, 'bench/list-users.js'))) return undefined
  const child = spawn('node', ['bench/list-users.js', '10000,100000,1000000'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (chunk) => { out += chunk })
  child.stderr.on('data', (chunk) => { err += chunk })
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`bench/list-users.js exited with ${code}: ${err.slice(-500)}`)
  return { rows: err.split('\n').filter((line) => line.startsWith('{"users"')).map((line) => JSON.parse(line)), table: out.trim() }
}

/** Runs one scenario's load and keeps its CPU per answer and its RSS (every 100 ms, and by kind at the end). */
async function measured (name, pid, run, round) {
  // CPU time per answer is steadier than requests per second on a machine shared with other work.
  const cpuBefore = cpuSeconds(pid)
  const { result: f, samples } = await underRssWatch(pid, run)
  if (samples.length) Object.assign(f, { rssPeakMB: Math.max(...samples) / MB, rssMeanMB: mean(samples) / MB, rssPartsMB: Object.fromEntries(Object.entries(rssParts(pid)).map(([kind, bytes]) => [kind, bytes / MB])) })
  if (f.ok !== undefined) f.cpuMicrosPerRequest = ((cpuSeconds(pid) - cpuBefore) / (f.ok + f.non2xx)) * 1e6
  log(`round ${round} ${name}: ${f.perSecond.toFixed(1)}/s, ${(f.cpuMicrosPerRequest ?? f.cpuMicrosPerOperation).toFixed(0)} µs CPU each${f.latency ? `, p99 ${f.latency.p99} ms, non-2xx ${f.non2xx}, errors ${f.errors}` : ''}${f.rssMeanMB ? `, RSS ${f.rssMeanMB.toFixed(1)} MB (glibc's arena ${f.rssPartsMB.malloc.toFixed(1)})` : ''}`)
  return f
}

/** Issue 26's figures: the traced instance against the service, from their own alternate rounds. */
function tracedSummary () {
  const avgOf = (name, field) => mean(results.tracedRounds.map((r) => r[name][field]))
  return {
    tracedPerSecond: avgOf('meTraced', 'perSecond'), untracedPerSecond: avgOf('me', 'perSecond'),
    tracedRatio: avgOf('meTraced', 'perSecond') / avgOf('me', 'perSecond'),
    tracedCpuMicros: avgOf('meTraced', 'cpuMicrosPerRequest'), untracedCpuMicros: avgOf('me', 'cpuMicrosPerRequest'),
    tracedCpuRatio: avgOf('meTraced', 'cpuMicrosPerRequest') / avgOf('me', 'cpuMicrosPerRequest'),
    tracedP99Ms: Math.max(...results.tracedRounds.map((r) => r.meTraced.latency.p99)),
    spansExported: results.spansExported
  }
}

/** The service's logins or sign-ups (`name`) against their ceiling's, from their own alternate rounds. */
function argon2CeilingSummary (name) {
  if (!results.argon2CeilingRounds.length) return {}
  const avgOf = (scenario, field) => mean(results.argon2CeilingRounds.map((r) => r[scenario][field]))
  const ceiling = `${name}Ceiling`
  return {
    ceilingPerSecond: avgOf(ceiling, 'perSecond'), besideCeilingPerSecond: avgOf(name, 'perSecond'),
    ceilingRatio: avgOf(name, 'perSecond') / avgOf(ceiling, 'perSecond'),
    ceilingCpuMicros: avgOf(ceiling, 'cpuMicrosPerRequest'), besideCeilingCpuMicros: avgOf(name, 'cpuMicrosPerRequest'),
    ceilingCpuRatio: avgOf(ceiling, 'cpuMicrosPerRequest') / avgOf(name, 'cpuMicrosPerRequest')
  }
}

// ---------------------------------------------------------------------------------------------

const database = await createDatabase('ums_perf')
const databaseUrl = database.url
const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
const serviceEnv = {
  APP_PROFILE: 'production',
  DATABASE_URL: databaseUrl,
  HOST: '127.0.0.1',
  PORT: String(port),
  MANAGEMENT_PORT: 'off',
  RATE_LIMITS: 'off',
  JWT_SECRET: randomBytes(36).toString('base64'), // 48 characters
  // As `npm start` sets them (glibc's malloc settings for argon2's 19 MB blocks, README), but the bench's thread pool.
  ...serviceStartEnv(),
  UV_THREADPOOL_SIZE: THREADPOOL,
  HASH_CONCURRENCY,
  SHUTDOWN_DRAIN_MS: '0'
}
const base = `http://127.0.0.1:${port}`
const eddsaPort = port + 5
const eddsaBase = `http://127.0.0.1:${eddsaPort}`
const results = {
  date: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model, cores: cpus().length, memoryGB: Math.round(totalmem() / 1024 ** 3), node: process.version, kernel: release() },
  command: 'npm run bench',
  settings: { connections: CONNECTIONS, durationS: DURATION, rounds: ROUNDS, serviceCpu: SERVICE_CPU, loadCpu: LOAD_CPU, UV_THREADPOOL_SIZE: THREADPOOL, malloc: Object.fromEntries(Object.entries(serviceStartEnv()).filter(([name]) => name.startsWith('MALLOC_'))), HASH_CONCURRENCY, RATE_LIMITS: 'off', LOG_LEVEL: 'info (production default, to /dev/null)', argon2: COST, listingUsers: LIST_USERS },
  rounds: [],
  tracedRounds: [],
  argon2CeilingRounds: [],
  summary: {}
}

let service
let serviceEdDSA
let serviceTraced
let sink
let ceiling
let dbCeiling
let batchedCeiling
let argon2Ceiling
try {
  const profile = flags.has('--profile') ? ['--cpu-prof', `--cpu-prof-dir=${join(root, 'bench')}`] : []
  const serviceCommand = ['taskset', '-c', SERVICE_CPU, 'node', ...serviceNodeArgs(), ...profile, 'dist/server.js']
  service = await startProcess(serviceCommand, serviceEnv, `${base}/auth/x`)
  // The same service with EdDSA tokens (issue 15), on the same core and database, loaded in turn.
  const eddsaKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' })
  serviceEdDSA = await startProcess(serviceCommand, { ...serviceEnv, PORT: String(eddsaPort), JWT_SECRET: '', JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: eddsaKey }, `${eddsaBase}/auth/x`)
  await sleep(1000)
  const idleAfterStart = rss(service.pid)
  log(`service pid ${service.pid} on core ${SERVICE_CPU}, idle RSS ${(idleAfterStart / MB).toFixed(1)} MB`)

  // Seed: an admin, a user, and filler up to 10^4 accounts, all with real argon2id hashes of the configured cost.
  const hash = await argon2.hash('Bench12345', { type: argon2.argon2id, ...COST })
  // ASCII lower-case names: each is its own username_key (src/users/user.ts).
  await sql`insert into users (username, username_key, email, password_hash, role) values ('benchadmin', 'benchadmin', 'bench-admin@example.com', ${hash}, 'ROLE_ADMIN'), ('benchuser', 'benchuser', 'bench-user@example.com', ${hash}, 'ROLE_USER')`
  await sql`insert into users (username, username_key, email, password_hash)
    select 'filler' || g, 'filler' || g, 'filler' || g || '@example.com', ${hash} from generate_series(3, ${LIST_USERS}) as g`
  await sql`vacuum analyze users`
  const userLogin = { email: 'bench-user@example.com', password: 'Bench12345' }
  const userToken = JSON.parse((await request(base, 'POST', '/auth/login', { body: userLogin })).text).token
  const adminToken = JSON.parse((await request(base, 'POST', '/auth/login', { body: { email: 'bench-admin@example.com', password: 'Bench12345' } })).text).token
  const eddsaToken = JSON.parse((await request(eddsaBase, 'POST', '/auth/login', { body: userLogin })).text).token
  if (JSON.parse(Buffer.from(eddsaToken.split('.')[0], 'base64url')).alg !== 'EdDSA') throw new Error('the EdDSA instance did not sign with EdDSA')
  log('seeded; tokens issued')
  const me = await request(base, 'GET', '/users/me', { token: userToken, body: userLogin })
  if (me.status !== 200) throw new Error(`seeding failed: /users/me answered ${me.status} ${me.text}`)
  const meEdDSA = await request(eddsaBase, 'GET', '/users/me', { token: eddsaToken, body: userLogin })
  if (meEdDSA.text !== me.text) throw new Error(`the EdDSA instance answered /users/me ${meEdDSA.status} ${meEdDSA.text}`)
  // The listing must be complete and valid before it is timed.
  const listing = await request(base, 'GET', '/admin/users', { token: adminToken }).catch((error) => ({ status: error.code, text: '' }))
  const listed = listing.status === 200 ? JSON.parse(listing.text) : []
  if (listed.length !== LIST_USERS || listed.some((row, i) => i > 0 && row.id <= listed[i - 1].id)) throw new Error(`seeding failed: /admin/users answered ${listing.status} with ${listed.length} rows`)

  ceiling = await startProcess(['taskset', '-c', SERVICE_CPU, 'node', 'bench/ceiling.js', String(ceilingPort), me.text], {}, `http://127.0.0.1:${ceilingPort}/`)
  dbCeiling = await startDbCeiling({ databaseUrl, secret: serviceEnv.JWT_SECRET, port: port + 4, cpu: SERVICE_CPU, nodeArgs: profile })
  // The database-bound ceiling must answer what the service answers.
  const dbMe = await request(dbCeilingBase, 'GET', '/users/me', { token: userToken, body: userLogin })
  const dbListing = await request(dbCeilingBase, 'GET', '/admin/users', { token: adminToken })
  if (dbMe.text !== me.text || dbListing.text !== JSON.stringify(listed)) throw new Error(`bench/db-ceiling.js answered ${dbMe.status} ${dbMe.text.slice(0, 200)} and ${dbListing.status}, not what the service answers`)
  // The batched ceiling (issue 25): the look-ups of one turn in one statement, as the service's.
  batchedCeiling = await startDbCeiling({ databaseUrl, secret: serviceEnv.JWT_SECRET, port: port + 6, cpu: SERVICE_CPU, nodeArgs: profile, env: { CEILING_BATCH: '1' } })
  const batchedMe = await request(batchedBase, 'GET', '/users/me', { token: userToken, body: userLogin })
  if (batchedMe.text !== me.text) throw new Error(`the batched ceiling answered ${batchedMe.status} ${batchedMe.text.slice(0, 200)}, not what the service answers`)

  // SPEC's own-info request: a JSON body on a GET, sent to the service and the ceiling alike.
  const meSpec = { method: 'GET', headers: { authorization: `Bearer ${userToken}`, 'content-type': 'application/json' }, body: JSON.stringify(userLogin) }
  const meEdDSASpec = { ...meSpec, headers: { ...meSpec.headers, authorization: `Bearer ${eddsaToken}` }, url: `${eddsaBase}/users/me` }
  const scenarios = {
    ceiling: () => load({ ...meSpec, url: `http://127.0.0.1:${ceilingPort}/users/me` }),
    dbCeiling: () => load({ ...meSpec, url: `${dbCeilingBase}/users/me` }),
    batchedCeiling: () => load({ ...meSpec, url: `${batchedBase}/users/me` }),
    me: () => load({ ...meSpec, url: `${base}/users/me` }),
    meEdDSA: () => load(meEdDSASpec),
    rawVerify: () => rawArgon2('verify'),
    login: () => load({ url: `${base}/auth/login`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(userLogin) }),
    dbCeilingListing: () => load({ url: `${dbCeilingBase}/admin/users`, headers: { authorization: `Bearer ${adminToken}` } }),
    listing: () => load({ url: `${base}/admin/users`, headers: { authorization: `Bearer ${adminToken}` } }),
    rawHash: () => rawArgon2('hash'),
    signup: async (round) => {
      const result = await load({ url: `${base}/auth/signup`, method: 'POST', headers: { 'content-type': 'application/json' }, signupPrefix: `b${round}${randomBytes(2).toString('hex')}` })
      // Back to exactly 10^4 users for the next listing round.
      await sql`delete from users where email like '%@bench.example.com'`
      return result
    }
  }

  log('warm-up (discarded): 3 s each of the ceilings, /users/me, the listing, login and sign-up')
  const warmUps = {
    ceiling: { ...meSpec, url: `http://127.0.0.1:${ceilingPort}/users/me` },
    dbCeiling: { ...meSpec, url: `${dbCeilingBase}/users/me` },
    batchedCeiling: { ...meSpec, url: `${batchedBase}/users/me` },
    me: { ...meSpec, url: `${base}/users/me` },
    meEdDSA: meEdDSASpec,
    dbCeilingListing: { url: `${dbCeilingBase}/admin/users`, headers: { authorization: `Bearer ${adminToken}` } },
    listing: { url: `${base}/admin/users`, headers: { authorization: `Bearer ${adminToken}` } },
    login: { url: `${base}/auth/login`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(userLogin) },
    signup: { url: `${base}/auth/signup`, method: 'POST', headers: { 'content-type': 'application/json' }, signupPrefix: `w${randomBytes(2).toString('hex')}` }
  }
  for (const [name, spec] of Object.entries(warmUps)) if (!only || only.includes(name)) await load({ ...spec, duration: 3 })
  await sql`delete from users where email like '%@bench.example.com'`

  for (let round = 1; round <= ROUNDS; round++) {
    const figures = {}
    for (const [name, run] of Object.entries(scenarios)) {
      if (only && !only.includes(name)) continue
      const pid = name === 'ceiling' ? ceiling.pid : name === 'batchedCeiling' ? batchedCeiling.pid : name.startsWith('dbCeiling') ? dbCeiling.pid : name === 'meEdDSA' ? serviceEdDSA.pid : service.pid
      figures[name] = await measured(name, pid, () => run(round), round)
    }
    results.rounds.push(figures)
  }
  await sleep(5000)
  const idleAfterLoad = rss(service.pid)

  // Issue 26: the same build with tracing on, every request sampled, its spans taken by a local
  // sink, against the service in alternate loads. Started only now: one more instance on the
  // service's core slows the others' rounds, even while it idles.
  if (!only || only.includes('meTraced')) {
    sink = await startOtlpSink()
    serviceTraced = await startProcess(serviceCommand, { ...serviceEnv, PORT: String(port + 7), ...sink.tracingEnv() }, `${tracedBase}/auth/x`)
    const traced = await request(tracedBase, 'GET', '/users/me', { token: userToken, body: userLogin })
    if (traced.text !== me.text) throw new Error(`the traced instance answered /users/me ${traced.status} ${traced.text}`)
    const tracedSpec = { ...meSpec, url: `${tracedBase}/users/me` }
    await load({ ...tracedSpec, duration: 3 })
    for (let round = 1; round <= ROUNDS; round++) {
      results.tracedRounds.push({
        me: await measured('me (beside the traced one)', service.pid, scenarios.me, round),
        meTraced: await measured('meTraced', serviceTraced.pid, () => load(tracedSpec), round)
      })
    }
    results.spansExported = sink.taken()
    await serviceTraced.stop()
    serviceTraced = undefined
  }

  // The login and sign-up ceilings: bench/db-ceiling.js's POST /auth/login and /auth/signup (bare
  // node:http, one hash in flight) in npm start's environment, against the service's in alternate
  // loads; started only now, as the traced instance is.
  if (!only || only.includes('argon2Ceilings')) {
    argon2Ceiling = await startDbCeiling({ databaseUrl, secret: serviceEnv.JWT_SECRET, port: port + 8, cpu: SERVICE_CPU, ...asNpmStart(THREADPOOL) })
    const answer = await request(argon2CeilingBase, 'POST', '/auth/login', { body: userLogin })
    const { token, ...account } = answer.status === 200 ? JSON.parse(answer.text) : {}
    const { token: serviceToken, ...serviceAccount } = JSON.parse((await request(base, 'POST', '/auth/login', { body: userLogin })).text)
    const verifyToken = ceilingVerifier(serviceEnv)
    const claims = (t) => { const { sub, role, uid } = verifyToken(t); return JSON.stringify({ sub, role, uid }) }
    if (JSON.stringify(account) !== JSON.stringify(serviceAccount) || claims(token) !== claims(serviceToken)) throw new Error(`the login ceiling answered ${answer.status} ${answer.text.slice(0, 200)}, not what the service answers`)
    const signedUp = await request(argon2CeilingBase, 'POST', '/auth/signup', { body: { username: 'ceilingcheck', email: 'ceilingcheck@bench.example.com', password: 'Secreto123' } })
    const [stored] = await sql`select id, username, email from users where username_key = 'ceilingcheck'`
    if (signedUp.status !== 201 || signedUp.text !== JSON.stringify(stored)) throw new Error(`the sign-up ceiling answered ${signedUp.status} ${signedUp.text.slice(0, 200)}`)
    await sql`delete from users where email like '%@bench.example.com'`
    const ceilingLogin = (spec = {}) => load({ ...warmUps.login, url: `${argon2CeilingBase}/auth/login`, ...spec })
    const ceilingSignup = async (round, spec = {}) => {
      const result = await load({ ...warmUps.signup, url: `${argon2CeilingBase}/auth/signup`, signupPrefix: `c${round}${randomBytes(2).toString('hex')}`, ...spec })
      await sql`delete from users where email like '%@bench.example.com'`
      return result
    }
    await ceilingLogin({ duration: 3 })
    await ceilingSignup(0, { duration: 3 })
    for (let round = 1; round <= ROUNDS; round++) {
      const pairs = [
        [['login', () => measured('login (beside its ceiling)', service.pid, scenarios.login, round)], ['loginCeiling', () => measured('loginCeiling', argon2Ceiling.pid, ceilingLogin, round)]],
        [['signup', () => measured('signup (beside its ceiling)', service.pid, () => scenarios.signup(round), round)], ['signupCeiling', () => measured('signupCeiling', argon2Ceiling.pid, () => ceilingSignup(round), round)]]
      ]
      // Each pair in the other order every other round, so drift falls on both.
      const figures = {}
      for (const pair of pairs) for (const [name, run] of round % 2 ? pair : [...pair].reverse()) figures[name] = await run()
      results.argon2CeilingRounds.push(figures)
    }
    await argon2Ceiling.stop()
    argon2Ceiling = undefined
  }

  if (only) throw new Error(`partial run (--only): no summary; idle RSS after the load ${(idleAfterLoad / MB).toFixed(1)} MB`)
  const avg = (name, field = 'perSecond') => mean(results.rounds.map((r) => r[name][field]))
  const p99 = Math.max(...results.rounds.map((r) => r.me.latency.p99))
  // A second ratio from CPU time per answer: on a machine shared with other work it moves less than the rates.
  const cpu = (name) => avg(name, name.startsWith('raw') ? 'cpuMicrosPerOperation' : 'cpuMicrosPerRequest')
  results.summary = {
    me: {
      perSecond: avg('me'), ceilingPerSecond: avg('ceiling'), ratio: avg('me') / avg('ceiling'), cpuMicros: cpu('me'), ceilingCpuMicros: cpu('ceiling'), cpuRatio: cpu('ceiling') / cpu('me'), p99Ms: p99, ceilingP99Ms: Math.max(...results.rounds.map((r) => r.ceiling.latency.p99)),
      ...tracedSummary(),
      eddsaPerSecond: avg('meEdDSA'), eddsaRatio: avg('meEdDSA') / avg('me'), eddsaCpuMicros: cpu('meEdDSA'), eddsaP99Ms: Math.max(...results.rounds.map((r) => r.meEdDSA.latency.p99)),
      dbCeilingPerSecond: avg('dbCeiling'), dbRatio: avg('me') / avg('dbCeiling'), dbCeilingCpuMicros: cpu('dbCeiling'), dbCpuRatio: cpu('dbCeiling') / cpu('me'), dbCeilingP99Ms: Math.max(...results.rounds.map((r) => r.dbCeiling.latency.p99)),
      batchedPerSecond: avg('batchedCeiling'), batchedRatio: avg('me') / avg('batchedCeiling'), batchedCpuMicros: cpu('batchedCeiling'), batchedCpuRatio: cpu('batchedCeiling') / cpu('me'), batchedP99Ms: Math.max(...results.rounds.map((r) => r.batchedCeiling.latency.p99)),
      rssMB: avg('me', 'rssMeanMB'), batchedRssMB: avg('batchedCeiling', 'rssMeanMB'), rssParts: results.rounds.at(-1).me.rssPartsMB, batchedRssParts: results.rounds.at(-1).batchedCeiling.rssPartsMB, rssPeakMB: Math.max(...results.rounds.map((r) => r.me.rssPeakMB)), batchedRssPeakMB: Math.max(...results.rounds.map((r) => r.batchedCeiling.rssPeakMB)),
      // The EdDSA instance made one login's hash, the service every login's and sign-up's: how much of the RSS row the hashes' kept blocks are.
      eddsaRssMB: avg('meEdDSA', 'rssMeanMB'), eddsaArenaMB: results.rounds.at(-1).meEdDSA.rssPartsMB.malloc
    },
    login: { perSecond: avg('login'), rawVerifyPerSecond: avg('rawVerify'), ratio: avg('login') / avg('rawVerify'), cpuMicros: cpu('login'), rawCpuMicros: cpu('rawVerify'), cpuRatio: cpu('rawVerify') / cpu('login'), p99Ms: Math.max(...results.rounds.map((r) => r.login.latency.p99)), non2xx: results.rounds.reduce((n, r) => n + r.login.non2xx, 0), ...argon2CeilingSummary('login') },
    signup: { perSecond: avg('signup'), rawHashPerSecond: avg('rawHash'), ratio: avg('signup') / avg('rawHash'), cpuMicros: cpu('signup'), rawCpuMicros: cpu('rawHash'), cpuRatio: cpu('rawHash') / cpu('signup'), p99Ms: Math.max(...results.rounds.map((r) => r.signup.latency.p99)), non2xx: results.rounds.reduce((n, r) => n + r.signup.non2xx, 0), ...argon2CeilingSummary('signup') },
    listing: {
      users: LIST_USERS, listingsPerSecond: avg('listing'), rowsPerSecond: avg('listing') * LIST_USERS, cpuMicrosPerRow: cpu('listing') / LIST_USERS, p99Ms: Math.max(...results.rounds.map((r) => r.listing.latency.p99)),
      dbCeilingListingsPerSecond: avg('dbCeilingListing'), dbRatio: avg('listing') / avg('dbCeilingListing'), cpuMicros: cpu('listing'), dbCeilingCpuMicros: cpu('dbCeilingListing'), dbCpuRatio: cpu('dbCeilingListing') / cpu('listing'),
      rssMB: avg('listing', 'rssMeanMB'), dbCeilingRssMB: avg('dbCeilingListing', 'rssMeanMB')
    },
    idleRss: { afterStartMB: idleAfterStart / MB, afterLoadMB: idleAfterLoad / MB }
  }
} finally {
  await ceiling?.stop()
  await dbCeiling?.stop()
  await batchedCeiling?.stop()
  await argon2Ceiling?.stop()
  await service?.stop()
  await serviceEdDSA?.stop()
  await serviceTraced?.stop()
  await sink?.close()
  await sql.end()
  await database.drop()
}

if (!flags.has('--quick')) {
  log('listing at 10^4, 10^5 and 10^6 users (bench/list-users.js, its own database)')
  // A failure here still leaves every other figure in the table and results.json.
  results.summary.listingAtScale = await listingAtScale().catch((error) => ({ error: error.message, rows: [] }))
}
log('development start-up: one first start (snapshot built), then five')
results.summary.devStartup = await devStartup()

// ---------------------------------------------------------------------------------------------

const s = results.summary
const pct = (x) => `${(x * 100).toFixed(1)}%`
const n = (x, digits = 0) => x.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const parts = (p) => `node binary ${n(p.binary, 1)}, malloc arena ${n(p.malloc, 1)}, anonymous (V8 heap, stacks) ${n(p.anonymous, 1)}, other files ${n(p.files, 1)} MB`
const rows = [
  ['GET /users/me', `${n(s.me.perSecond)} req/s`, `ceiling ${n(s.me.ceilingPerSecond)} req/s`, pct(s.me.ratio), '≥ 25%', s.me.ratio >= 0.25],
  ['GET /users/me, CPU per answer', `${n(s.me.cpuMicros)} µs`, `ceiling ${n(s.me.ceilingCpuMicros)} µs`, pct(s.me.cpuRatio), '(steadier check)', undefined],
  ['GET /users/me vs the database-bound ceiling', `${n(s.me.perSecond)} req/s`, `db ceiling ${n(s.me.dbCeilingPerSecond)} req/s`, pct(s.me.dbRatio), '≥ 85%', s.me.dbRatio >= 0.85],
  ['GET /users/me vs the database-bound ceiling, CPU per answer', `${n(s.me.cpuMicros)} µs`, `db ceiling ${n(s.me.dbCeilingCpuMicros)} µs`, pct(s.me.dbCpuRatio), '(steadier check)', undefined],
  ['GET /users/me vs the batched ceiling (issue 25)', `${n(s.me.perSecond)} req/s`, `batched ceiling ${n(s.me.batchedPerSecond)} req/s`, pct(s.me.batchedRatio), '≥ 90%', s.me.batchedRatio >= 0.9],
  ['GET /users/me vs the batched ceiling, CPU per answer', `${n(s.me.cpuMicros)} µs`, `batched ceiling ${n(s.me.batchedCpuMicros)} µs`, pct(s.me.batchedCpuRatio), '(steadier check)', undefined],
  ['RSS under the /users/me load (mean)', `${n(s.me.rssMB, 1)} MB (peak ${n(s.me.rssPeakMB, 1)})`, `batched ceiling ${n(s.me.batchedRssMB, 1)} MB (peak ${n(s.me.batchedRssPeakMB, 1)})`, pct(s.me.rssMB / s.me.batchedRssMB), '≤ 110%', s.me.rssMB <= 1.1 * s.me.batchedRssMB],
  ['RSS at the end of the last /users/me load, by kind', parts(s.me.rssParts), `batched ceiling ${parts(s.me.batchedRssParts)}`, '', '', undefined],
  ['RSS under its /users/me load, the EdDSA instance (one login\'s hash)', `${n(s.me.eddsaRssMB, 1)} MB (malloc arena ${n(s.me.eddsaArenaMB, 1)})`, `batched ceiling ${n(s.me.batchedRssMB, 1)} MB`, pct(s.me.eddsaRssMB / s.me.batchedRssMB), '', undefined],
  ['GET /users/me, tracing on, every request sampled (issue 26)', `${n(s.me.tracedPerSecond)} req/s, ${n(s.me.tracedCpuMicros)} µs CPU each`, `tracing off ${n(s.me.untracedPerSecond)} req/s, ${n(s.me.untracedCpuMicros)} µs (its own rounds)`, pct(s.me.tracedRatio), '≥ 85%', s.me.tracedRatio >= 0.85],
  ['GET /users/me, EdDSA tokens (issue 15)', `${n(s.me.eddsaPerSecond)} req/s, ${n(s.me.eddsaCpuMicros)} µs CPU each`, `HS256 ${n(s.me.perSecond)} req/s, ${n(s.me.cpuMicros)} µs`, pct(s.me.eddsaRatio), '≥ 90%', s.me.eddsaRatio >= 0.9],
  ['GET /users/me p99', `${s.me.p99Ms} ms`, `ceiling p99 ${s.me.ceilingP99Ms} ms, db ceiling ${s.me.dbCeilingP99Ms} ms, batched ${s.me.batchedP99Ms} ms`, '', '≤ 6 ms', s.me.p99Ms <= 6],
  ['POST /auth/login', `${n(s.login.perSecond, 1)} req/s`, `raw verify ${n(s.login.rawVerifyPerSecond, 1)}/s`, pct(s.login.ratio), '≥ 95%', s.login.ratio >= 0.95],
  ['POST /auth/login, CPU per answer', `${n(s.login.cpuMicros / 1000, 1)} ms`, `raw verify ${n(s.login.rawCpuMicros / 1000, 1)} ms`, pct(s.login.cpuRatio), '(steadier check)', undefined],
  ['POST /auth/login vs the login ceiling', `${n(s.login.besideCeilingPerSecond, 1)} req/s, ${n(s.login.besideCeilingCpuMicros / 1000, 1)} ms CPU each`, `login ceiling ${n(s.login.ceilingPerSecond, 1)} req/s, ${n(s.login.ceilingCpuMicros / 1000, 1)} ms (their own rounds)`, pct(s.login.ceilingRatio), '', undefined],
  ['POST /auth/signup', `${n(s.signup.perSecond, 1)} req/s`, `raw hash ${n(s.signup.rawHashPerSecond, 1)}/s`, pct(s.signup.ratio), '≥ 95%', s.signup.ratio >= 0.95],
  ['POST /auth/signup, CPU per answer', `${n(s.signup.cpuMicros / 1000, 1)} ms`, `raw hash ${n(s.signup.rawCpuMicros / 1000, 1)} ms`, pct(s.signup.cpuRatio), '(steadier check)', undefined],
  ['POST /auth/signup vs the sign-up ceiling', `${n(s.signup.besideCeilingPerSecond, 1)} req/s, ${n(s.signup.besideCeilingCpuMicros / 1000, 1)} ms CPU each`, `sign-up ceiling ${n(s.signup.ceilingPerSecond, 1)} req/s, ${n(s.signup.ceilingCpuMicros / 1000, 1)} ms (their own rounds)`, pct(s.signup.ceilingRatio), '', undefined],
  ['GET /admin/users, 10^4 users, 32 conn.', `${n(s.listing.rowsPerSecond)} rows/s`, 'target 1,000,000 rows/s', pct(s.listing.rowsPerSecond / 1e6), '≥ 1,000,000 rows/s', s.listing.rowsPerSecond >= 1e6],
  ['GET /admin/users vs the database-bound ceiling', `${n(s.listing.listingsPerSecond, 1)} listings/s`, `db ceiling ${n(s.listing.dbCeilingListingsPerSecond, 1)} listings/s`, pct(s.listing.dbRatio), '≥ 130%', s.listing.dbRatio >= 1.3],
  ['GET /admin/users vs the database-bound ceiling, CPU per listing', `${n(s.listing.cpuMicros / 1000, 1)} ms`, `db ceiling ${n(s.listing.dbCeilingCpuMicros / 1000, 1)} ms`, pct(s.listing.dbCpuRatio), '(steadier check)', undefined],
  ['RSS under 32 listings of 10^4 users (mean)', `${n(s.listing.rssMB, 1)} MB`, `db ceiling ${n(s.listing.dbCeilingRssMB, 1)} MB`, pct(s.listing.rssMB / s.listing.dbCeilingRssMB), '', undefined],
  // What an instance costs: CPU-seconds a thousand answers take, to size a deployment (issue 25).
  ['CPU-seconds per 1,000 GET /users/me', n(s.me.cpuMicros / 1000, 3), `batched ceiling ${n(s.me.batchedCpuMicros / 1000, 3)}, db ceiling ${n(s.me.dbCeilingCpuMicros / 1000, 3)}`, '', '', undefined],
  ['CPU-seconds per 1,000 GET /admin/users (10^4 users)', n(s.listing.cpuMicros / 1000, 1), `db ceiling ${n(s.listing.dbCeilingCpuMicros / 1000, 1)}`, '', '', undefined],
  ['CPU-seconds per 1,000 POST /auth/login', n(s.login.cpuMicros / 1000, 1), `raw verify ${n(s.login.rawCpuMicros / 1000, 1)}`, '', '', undefined],
  ['CPU-seconds per 1,000 POST /auth/signup', n(s.signup.cpuMicros / 1000, 1), `raw hash ${n(s.signup.rawCpuMicros / 1000, 1)}`, '', '', undefined]
]
const scale = s.listingAtScale?.rows
if (scale?.length) {
  for (const r of scale) rows.push([`GET /admin/users, 10^${Math.log10(r.users)} users, 1 conn.`, `${n(r.rowsPerS)} rows/s`, `peak RSS ${r.peakMB} MB`, '', '', undefined])
  const small = scale.find((r) => r.users === 10_000)
  const large = scale.find((r) => r.users === 1_000_000)
  if (small && large) {
    const growth = Number(large.peakMB) - Number(small.peakMB)
    s.listingAtScale.peakGrowthMB = growth
    rows.push(['Listing peak RSS, 10^6 over 10^4', `+${growth.toFixed(1)} MB`, `${large.peakMB} vs ${small.peakMB} MB`, '', '≤ 20 MB', growth <= 20])
  }
}
rows.push(
  ['Idle RSS after start', `${s.idleRss.afterStartMB.toFixed(1)} MB`, '', '', '< 100 MB', s.idleRss.afterStartMB < 100],
  ['Idle RSS after the load', `${s.idleRss.afterLoadMB.toFixed(1)} MB`, '', '', '< 100 MB', s.idleRss.afterLoadMB < 100],
  ['Dev start-up (snapshot cached), median of 5', `${n(s.devStartup.medianMs)} ms`, `first start ${n(s.devStartup.firstStartMs)} ms`, '', '< 2,000 ms', s.devStartup.medianMs < 2000]
)
results.table = rows.map(([scenario, figure, limit, ratio, target, met]) => ({ scenario, figure, limit, ratio, target, met }))
writeFileSync(join(root, 'bench/results.json'), JSON.stringify(results, null, 2) + '\n')

const header = ['scenario', 'figure', 'limit (same run)', 'ratio', 'target', 'met']
console.log(`\nService on core ${SERVICE_CPU}, autocannon on core ${LOAD_CPU}; ${CONNECTIONS} connections × ${DURATION} s × ${ROUNDS} rounds; RATE_LIMITS=off; UV_THREADPOOL_SIZE=${THREADPOOL}; HASH_CONCURRENCY=${HASH_CONCURRENCY}\n`)
console.log(`| ${header.join(' | ')} |`)
console.log(`|${header.map(() => '---').join('|')}|`)
for (const r of results.table) console.log(`| ${r.scenario} | ${r.figure} | ${r.limit} | ${r.ratio} | ${r.target} | ${r.met === undefined ? '' : r.met ? 'yes' : 'NO'} |`)
console.log('\nbench/results.json written')
