// Shared by the bench scripts: a throw-away PostgreSQL database and the built service on it
// (started as `npm start` starts it, which the load-balancer test reads from here too).
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { once } from 'node:events'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { createSigner, createVerifier } from 'fast-jwt'
import postgres from 'postgres'

/**
 * The service's default argon2id cost, ARGON2_MINIMUM in src/config/index.ts (the ceilings do not
 * import that module: it would bring TypeBox into their memory, which the bench compares).
 */
export const ARGON2_COST = { memoryCost: 19456, timeCost: 2, parallelism: 1 }

export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** Creates an empty database; returns its URL and a function that drops it. */
export async function createDatabase (prefix = 'ums_bench') {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    async drop () {
      const dropper = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
      await dropper.unsafe(`drop database if exists ${name} with (force)`)
      await dropper.end()
    }
  }
}

const startScript = () => JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).scripts.start

/**
 * Node's options for the service: those `npm start` gives it (package.json), then
 * BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=bench/profiles"; a later option wins).
 */
export function serviceNodeArgs () {
  return [...startScript().match(/ node ((?:--\S+ )*)dist\/server\.js/)[1].split(' ').filter(Boolean), ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [])]
}

/** The environment `npm start` sets (its `NAME=${NAME:-default}` pairs), each overridden by this process's own. */
export function serviceStartEnv () {
  return Object.fromEntries([...startScript().matchAll(/(\w+)=\$\{\w+:-([^}]*)\}/g)].map(([, name, value]) => [name, process.env[name] ?? value]))
}

/**
 * Starts `node dist/server.js` in the production profile (rate limits off: this is a load test)
 * and resolves once it answers. `cpu` pins it with taskset; `dir` is another build's folder
 * (bench/me-ab.js), `nodeArgs` replaces node's options.
 */
export async function startService ({ databaseUrl, port = 18080, env = {}, cpu, dir = '.', nodeArgs = serviceNodeArgs() } = {}) {
  const serviceEnv = {
    ...process.env,
    APP_PROFILE: 'production',
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    HOST: '127.0.0.1',
    MANAGEMENT_PORT: 'off',
    RATE_LIMITS: 'off',
    LOG_LEVEL: 'warn',
    SHUTDOWN_DRAIN_MS: '0',
    JWT_SECRET: randomBytes(36).toString('base64'),
    ...serviceStartEnv(),
    ...env
  }
  const node = ['node', ...nodeArgs, `${dir}/dist/server.js`]
  const command = cpu === undefined ? node : ['taskset', '-c', String(cpu), ...node]
  const base = `http://127.0.0.1:${port}`
  return { base, ...await startProcess(command, serviceEnv, `${base}/auth/x`) }
}

const root = fileURLToPath(new URL('..', import.meta.url))

/** Runs a node script (pinned with taskset when `cpu` is given) and parses its last stdout line as JSON. */
export async function runNode (script, args, { cpu, env = {} } = {}) {
  const command = cpu === undefined ? ['node', script, ...args] : ['taskset', '-c', cpu, 'node', script, ...args]
  const child = spawn(command[0], command.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk) => { out += chunk })
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`${script} exited with ${code}`)
  return JSON.parse(out.trim().split('\n').at(-1))
}

/** The fields of a /proc stat file after the command name: [7] minor faults, [11] user and [12] system ticks of 10 ms. */
export const procStat = (path) => readFileSync(path, 'utf8').split(') ')[1].split(' ')

/** User + system CPU seconds of a process so far. */
export function cpuSeconds (pid) {
  const fields = procStat(`/proc/${pid}/stat`)
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/**
 * A process's resident memory by kind, in bytes, from /proc/<pid>/smaps: the node binary's pages
 * (code both processes share in kind), glibc's main arena (`[heap]`: argon2's blocks live there
 * under npm start's malloc settings), other files (shared libraries, argon2's .node) and the
 * anonymous mappings (V8's heap, thread stacks, glibc's other arenas).
 */
export function rssParts (pid) {
  const parts = { binary: 0, malloc: 0, files: 0, anonymous: 0 }
  let kind = 'anonymous'
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const mapping = line.match(/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/)
    if (mapping) {
      const path = mapping[1]
      kind = path === '' || (path.startsWith('[') && path !== '[heap]') ? 'anonymous' : path === '[heap]' ? 'malloc' : /\/node$/.test(path) ? 'binary' : 'files'
    } else if (line.startsWith('Rss:')) parts[kind] += Number(line.split(/\s+/)[1]) * 1024
  }
  return parts
}

export function rss (pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(status.match(/^VmRSS:\s+(\d+) kB/m)[1]) * 1024
}

/** Runs `run` while reading `pid`'s VmRSS every 100 ms: its memory under the load `run` makes. */
export async function underRssWatch (pid, run) {
  const samples = []
  const sampler = setInterval(() => samples.push(rss(pid)), 100)
  try {
    return { result: await run(), samples }
  } finally {
    clearInterval(sampler)
  }
}

/** Starts `command` in the project's folder and resolves once `readyUrl` answers anything. */
export async function startProcess (command, env, readyUrl) {
  const started = performance.now()
  const child = spawn(command[0], command.slice(1), { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited with ${child.exitCode}`)
    try {
      await fetch(readyUrl)
      break
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
  return {
    child,
    pid: child.pid,
    startMs: performance.now() - started,
    async stop () {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await once(child, 'exit')
    }
  }
}

export async function postJson (base, path, body, headers = {}) {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  return { status: response.status, body: await response.json() }
}

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/**
 * Starts bench/db-ceiling.js (the database-bound ceiling, or with `design` one of
 * bench/listing-designs.js's listings) on `databaseUrl`, verifying tokens signed with `secret`.
 */
export async function startDbCeiling ({ databaseUrl, secret, port, cpu, design, env = {}, nodeArgs = [] }) {
  const script = ['node', ...nodeArgs, 'bench/db-ceiling.js']
  const command = cpu === undefined ? script : ['taskset', '-c', String(cpu), ...script]
  const base = `http://127.0.0.1:${port}`
  return { base, ...await startProcess(command, { DATABASE_URL: databaseUrl, JWT_SECRET: secret, PORT: String(port), ...(design ? { LISTING_DESIGN: design } : {}), ...env }, `${base}/`) }
}

/** npm start's node options and environment (malloc settings) with the bench's thread pool: a ceiling started as the service is. */
export function asNpmStart (threadpool) {
  return { nodeArgs: serviceNodeArgs(), env: { ...serviceStartEnv(), UV_THREADPOOL_SIZE: threadpool } }
}

/** The service's token issuer and audience: JWT_ISSUER and JWT_AUDIENCE, or their default. */
const tokenParties = (env) => ({ iss: env.JWT_ISSUER ?? 'user-management', aud: env.JWT_AUDIENCE ?? 'user-management' })

/** The service's HS256 access token (typ at+jwt, iss, aud, iat, exp a day later: JWT_EXPIRATION's default) as a fast-jwt signer: the login ceiling's. */
export function ceilingSigner (env) {
  return createSigner({
    key: env.JWT_SECRET,
    algorithm: 'HS256',
    ...tokenParties(env),
    expiresIn: 86_400_000,
    header: { typ: 'at+jwt' }
  })
}

/** The service's token checks (alg, iss, aud, typ, required claims) as a fast-jwt verifier with its cache: the ceilings' and the Fastify floor's. */
export function ceilingVerifier (env) {
  return createVerifier({
    key: env.JWT_SECRET,
    algorithms: ['HS256'],
    allowedIss: tokenParties(env).iss,
    allowedAud: tokenParties(env).aud,
    checkTyp: 'at+jwt',
    requiredClaims: ['sub', 'role', 'uid', 'iss', 'aud', 'jti', 'iat', 'exp'],
    cache: 1000
  })
}

/**
 * The look-up by id of the database-bound ceilings and the Fastify floor: one statement per
 * look-up, or (`batched`, issue 25) the look-ups asked in one turn of the event loop answered by
 * one `where id = any($1)` statement after it, as the service's are.
 */
export function userLookUp (sql, { batched = false } = {}) {
  if (!batched) return async (id) => (await sql`select id, username, email, role from users where id = ${id}`)[0]
  let waiting = null
  async function flush () {
    const batch = waiting
    waiting = null
    try {
      const rows = await sql`select id, username, email, role from users where id = any(${batch.map((w) => w.id)}::int[])`
      const byId = new Map(rows.map((row) => [row.id, row]))
      for (const w of batch) w.resolve(byId.get(w.id))
    } catch (error) {
      for (const w of batch) w.reject(error)
    }
  }
  return (id) => new Promise((resolve, reject) => {
    if (waiting === null) {
      waiting = []
      setImmediate(flush)
    }
    waiting.push({ id, resolve, reject })
  })
}

/**
 * Signs `user` up on `base` and logs it in; returns a function that loads a server's GET /users/me
 * with SPEC's own-info request for `duration` seconds from core 1 (32 connections) and gives its
 * rate, CPU per answer (µs) and p99. Throws on any answer but 200.
 */
export async function meLoader (base, user) {
  await postJson(base, '/auth/signup', user)
  const { body: { token } } = await postJson(base, '/auth/login', { email: user.email, password: user.password })
  return async ({ pid, base }, duration) => {
    const before = cpuSeconds(pid)
    const { result: f, samples } = await underRssWatch(pid, () => runNode('bench/load.js', [JSON.stringify({
      connections: 32, duration, url: `${base}/users/me`, method: 'GET',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ email: user.email, password: user.password })
    })], { cpu: '1' }))
    if (f.non2xx > 0 || f.errors > 0) throw new Error(`${base}: ${f.non2xx} non-2xx answers, ${f.errors} errors`)
    const rssMeanMB = samples.reduce((sum, bytes) => sum + bytes, 0) / samples.length / 2 ** 20
    return { rate: f.perSecond, cpu: ((cpuSeconds(pid) - before) / f.ok) * 1e6, p99: f.latency.p99, rssMeanMB, answers: f.ok }
  }
}

/**
 * The built app (npm run build) in this process, with the production profile and its logger
 * writing to /dev/null, over a fresh database holding one user, logged in. Listens on `port`
 * when one is given; `close` stops it and drops the database.
 */
export async function startInProcessApp (prefix, { port } = {}) {
  const [{ default: argon2 }, { default: pino }, { loadConfig }, { buildApp }, { loggerOptions }] = await Promise.all([
    import('argon2'), import('pino'), import('../dist/config/index.js'), import('../dist/app.js'), import('../dist/telemetry/logger.js')
  ])
  const login = { email: 'bench-user@example.com', password: 'Bench12345' }
  const database = await createDatabase(prefix)
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: database.url, JWT_SECRET: randomBytes(36).toString('base64'), RATE_LIMITS: 'off', MANAGEMENT_PORT: 'off' })
  const app = await buildApp(config, { logger: { ...loggerOptions(config), stream: pino.destination({ dest: '/dev/null', sync: false, minLength: 4096 }) } })
  const close = async () => { await app.close(); await database.drop() }
  const sql = postgres(database.url, { max: 1, onnotice: () => {} })
  try {
    await (port === undefined ? app.ready() : app.listen({ port, host: '127.0.0.1' }))
    const hash = await argon2.hash(login.password, { type: argon2.argon2id, ...config.argon2 })
    await sql`insert into users (username, username_key, email, password_hash) values ('benchuser', 'benchuser', ${login.email}, ${hash})`
  } catch (error) {
    await close()
    throw error
  } finally {
    await sql.end()
  }
  const { token } = (await app.inject({ method: 'POST', url: '/auth/login', payload: login })).json()
  return { app, login, token, close }
}

/**
 * The rounds of an A/B of two builds: each loaded in turn, A B, B A, A B … so that drift over
 * the run falls on both; prints each round and the means, `unit` naming what one answer is.
 */
export async function abRounds (services, load, { rounds, seconds, unit, digits }) {
  const figures = { A: [], B: [] }
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 ? ['B', 'A'] : ['A', 'B']) {
      const f = await load(services[name], seconds)
      figures[name].push(f)
      console.log(`${name}: ${f.rate.toFixed(digits)} ${unit}/s, ${f.cpu.toFixed(1)} µs CPU each, p99 ${f.p99} ms${f.rssMeanMB ? `, RSS ${f.rssMeanMB.toFixed(1)} MB` : ''}`)
    }
  }
  const mean = (name, field) => figures[name].reduce((sum, f) => sum + f[field], 0) / figures[name].length
  console.log(`A ${mean('A', 'rate').toFixed(digits)} ${unit}/s, ${mean('A', 'cpu').toFixed(1)} µs | B ${mean('B', 'rate').toFixed(digits)} ${unit}/s, ${mean('B', 'cpu').toFixed(1)} µs | B/A: rate ${(mean('B', 'rate') / mean('A', 'rate')).toFixed(3)}, CPU per answer ${(mean('B', 'cpu') / mean('A', 'cpu')).toFixed(3)}${figures.A[0].rssMeanMB ? `, RSS ${mean('A', 'rssMeanMB').toFixed(1)} → ${mean('B', 'rssMeanMB').toFixed(1)} MB` : ''}`)
}
