// GET /users/me with tracing off (A) and on (B): one build, two instances on core 0 over one
// database, loaded in turn from core 1 in the order A B B A … (bench/lib.js abRounds). B exports
// its spans to a local sink that takes them (bench/otlp-sink.js), sampled by `sampler` (default
// always_on: every request) with its `ratio` for the ratio samplers.
// Usage: npm run build && node bench/tracing-ab.js [rounds = 6] [seconds = 5] [sampler] [ratio]
import { randomBytes } from 'node:crypto'
import { abRounds, createDatabase, meLoader, startService } from './lib.js'
import { startOtlpSink } from './otlp-sink.js'

const [rounds = '6', seconds = '5', sampler = 'always_on', ratio] = process.argv.slice(2)
const database = await createDatabase('ums_tracing_ab')
const sink = await startOtlpSink()
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64') }
const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_SERVICE_NAME: 'ums-bench', OTEL_TRACES_SAMPLER: sampler, ...(ratio ? { OTEL_TRACES_SAMPLER_ARG: ratio } : {}) }
const services = {
  A: await startService({ databaseUrl: database.url, port: 18710, env, cpu: 0 }),
  B: await startService({ databaseUrl: database.url, port: 18711, env: { ...env, ...tracing }, cpu: 0 })
}
try {
  const load = await meLoader(services.A.base, { username: 'tracer', email: 'tracer@example.com', password: 'Bench12345' })
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
