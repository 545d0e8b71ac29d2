import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { createDatabase, meLoader, serviceNodeArgs, startService } from './lib.js'
import { startOtlpSink } from './otlp-sink.js'
const database = await createDatabase('ums_tprof')
const sink = await startOtlpSink()
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64'), OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_TRACES_SAMPLER: 'always_on', ...JSON.parse(process.env.EXTRA_ENV ?? '{}') }
const service = await startService({ databaseUrl: database.url, port: 18720, env, cpu: 0, nodeArgs: [...serviceNodeArgs(), '--cpu-prof', `--cpu-prof-dir=${join(process.cwd(), 'bench')}`] })
const load = await meLoader(service.base, { username: 'tracer', email: 'tracer@example.com', password: 'Bench12345' })
await load(service, 3)
const f = await load(service, 10)
console.log(service.pid, JSON.stringify(f), 'requests', Math.round(f.rate * 10))
await service.stop(); await sink.close(); await database.drop()
