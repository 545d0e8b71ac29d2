// GET /users/me with tracing off (A) and on (B): one build, two instances on core 0 over one
// database, loaded in turn from core 1 in the order A B B A … (bench/lib.js abRounds). B exports
// its spans to a local sink that takes them (bench/otlp-sink.js), sampled by `sampler` (default
// always_on: every request) with its `ratio` for the ratio samplers. With `--profile`, both run
// under `node --cpu-prof`, and their busy time per answer is compared by category
// (bench/profile-summary.js): where a traced request's extra time goes.
// Usage: npm run build && node bench/tracing-ab.js [rounds = 6] [seconds = 5] [sampler] [ratio] [--profile]
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { abRounds, createDatabase, meLoader, serviceNodeArgs, startService } from './lib.js'
import { startOtlpSink } from './otlp-sink.js'
import { summarize } from './profile-summary.js'

const profiling = process.argv.includes('--profile')
const [rounds = '6', seconds = '5', sampler = 'always_on', ratio] = process.argv.slice(2).filter((arg) => arg !== '--profile')
const profileDir = profiling ? mkdtempSync(join(tmpdir(), 'ums-tracing-profiles-')) : undefined
const nodeArgs = (name) => profiling ? [...serviceNodeArgs(), '--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : serviceNodeArgs()
const database = await createDatabase('ums_tracing_ab')
const sink = await startOtlpSink()
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64') }
const services = {
  A: await startService({ databaseUrl: database.url, port: 18710, env, cpu: 0, nodeArgs: nodeArgs('A') }),
  B: await startService({ databaseUrl: database.url, port: 18711, env: { ...env, ...sink.tracingEnv(sampler, ratio) }, cpu: 0, nodeArgs: nodeArgs('B') })
}
// Every answer each instance gave, warm-up included: what its profile's busy time is divided by.
const answers = new Map()
try {
  const loadOnce = await meLoader(services.A.base, { username: 'tracer', email: 'tracer@example.com', password: 'Bench12345' })
  const load = async (service, duration) => {
    const f = await loadOnce(service, duration)
    answers.set(service, (answers.get(service) ?? 0) + f.answers)
    return f
  }
  await load(services.A, 3)
  await load(services.B, 3)
  await abRounds(services, load, { rounds: Number(rounds), seconds: Number(seconds), unit: 'req', digits: 0 })
  const { exports, bytes } = sink.taken()
  console.log(`the sink took ${exports} exports, ${(bytes / 1e6).toFixed(1)} MB`)
} finally {
  await services.A.stop()
  await services.B.stop()
  await sink.close()
  await database.drop()
}

if (profiling) {
  // Each instance's profile is written when it exits.
  const perAnswer = (name) => {
    const file = join(profileDir, name, readdirSync(join(profileDir, name))[0])
    const { busy, totals } = summarize(file)
    console.log(`${name}: ${file}, ${(busy / answers.get(services[name])).toFixed(1)} µs busy an answer`)
    return new Map([...totals].map(([category, micros]) => [category, micros / answers.get(services[name])]))
  }
  const off = perAnswer('A')
  const on = perAnswer('B')
  const rows = [...new Set([...off.keys(), ...on.keys()])].map((category) => [category, off.get(category) ?? 0, on.get(category) ?? 0])
  console.log('\n| busy µs an answer, by category | tracing off | on | on − off |\n|---|---|---|---|')
  for (const [category, a, b] of rows.sort((x, y) => (y[2] - y[1]) - (x[2] - x[1]))) {
    if (Math.max(a, b) >= 0.5) console.log(`| ${category} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b - a).toFixed(1)} |`)
  }
}
