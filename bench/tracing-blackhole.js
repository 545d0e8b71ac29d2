// GET /users/me under load with tracing on (every request sampled) while the collector takes
// spans, then for 60 s while it black-holes them (reads each export, never answers): the p99
// and rate of each 5 s round, the service's RSS after it, the spans it counted as dropped, and
// how long SIGTERM then takes. The service on core 0, the load from core 1.
// Usage: npm run build && node bench/tracing-blackhole.js [seconds black-holed = 60]
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createDatabase, meLoader, rss, startService } from './lib.js'
import { startOtlpSink } from './otlp-sink.js'

const [blackHoled = '60'] = process.argv.slice(2)
const database = await createDatabase('ums_tracing_blackhole')
const sink = await startOtlpSink()
const managementPort = 18731
const service = await startService({
  databaseUrl: database.url,
  port: 18730,
  cpu: 0,
  env: { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64'), MANAGEMENT_PORT: String(managementPort), ...sink.tracingEnv() }
})
const dropped = async () => {
  const text = await (await fetch(`http://127.0.0.1:${managementPort}/metrics`)).text()
  return Object.fromEntries([...text.matchAll(/^otel_spans_dropped_total\{reason="(\w+)"\} (\d+)/gm)].map(([, reason, count]) => [reason, Number(count)]))
}
try {
  const load = await meLoader(service.base, { username: 'holed', email: 'holed@example.com', password: 'Bench12345' })
  await load(service, 3)
  const phase = async (name, rounds) => {
    const figures = []
    for (let i = 0; i < rounds; i++) {
      const f = await load(service, 5)
      figures.push({ ...f, rss: rss(service.pid) / 1e6 })
      console.log(`${name} ${i + 1}: ${f.rate.toFixed(0)} req/s, p99 ${f.p99} ms, RSS ${(rss(service.pid) / 1e6).toFixed(1)} MB`)
    }
    const p99s = figures.map((f) => f.p99).sort((a, b) => a - b)
    return { p99Max: p99s.at(-1), p99Median: p99s[Math.floor(p99s.length / 2)], rate: figures.reduce((s, f) => s + f.rate, 0) / figures.length, rss: figures.map((f) => f.rss) }
  }
  const up = await phase('collector up', 4)
  console.log(`dropped with the collector up: ${JSON.stringify(await dropped())}`)
  sink.setBlackHole(true)
  const holed = await phase('black-holed', Math.ceil(Number(blackHoled) / 5))
  console.log(`dropped after the black hole: ${JSON.stringify(await dropped())}`)
  const started = performance.now()
  service.child.kill('SIGTERM')
  const [code] = await once(service.child, 'exit')
  console.log(`SIGTERM: exit ${code} after ${(performance.now() - started).toFixed(0)} ms`)
  console.log(`collector up: ${up.rate.toFixed(0)} req/s, p99 median ${up.p99Median} ms, max ${up.p99Max} ms, RSS ${up.rss.map((r) => r.toFixed(0)).join(' ')} MB`)
  console.log(`black-holed:  ${holed.rate.toFixed(0)} req/s, p99 median ${holed.p99Median} ms, max ${holed.p99Max} ms, RSS ${holed.rss.map((r) => r.toFixed(0)).join(' ')} MB`)
} finally {
  await service.stop()
  await sink.close()
  await database.drop()
}
