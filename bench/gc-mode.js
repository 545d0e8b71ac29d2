// GET /users/me on fresh instances of the built service, `n` per semi-space size, the sizes
// alternating in order, each loaded for `seconds` (core 0, 32 connections from core 1): rate, CPU
// per answer, p99, mean RSS, and its GC under the load (bench/gc-probe.cjs): scavenges, their mean
// pause, full collections, old space. An instance whose scavenges average over 4 ms is in the
// old-generation mode of docs/performance.md (each scavenge promoting about 1 MB). `--traced`:
// tracing on, every request sampled, spans to a local sink (bench/otlp-sink.js). A size may carry
// V8 options after it, e.g. '8,8 --no-allocation-site-pretenuring'.
// Usage: npm run build && node bench/gc-mode.js [n = 6] [seconds = 8] [sizes = 8,16] [--traced]
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createDatabase, meLoader, startService } from './lib.js'
import { startOtlpSink } from './otlp-sink.js'
const [n = '6', seconds = '8', sizes = '8,16'] = process.argv.slice(2).filter((arg) => arg !== '--traced')
const sink = process.argv.includes('--traced') ? await startOtlpSink() : undefined
const database = await createDatabase('ums_gcmode')
const probeDir = mkdtempSync(join(tmpdir(), 'ums-gc-'))
const probe = fileURLToPath(new URL('gc-probe.cjs', import.meta.url))
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64'), GC_PROBE_DIR: probeDir }
if (sink) Object.assign(env, sink.tracingEnv())
let load
const rows = []
try {
  for (let i = 0; i < Number(n); i++) {
    const order = sizes.split(',')
    if (i % 2) order.reverse()
    for (const semi of order) {
      const [size, ...v8Options] = semi.split(' ')
      const service = await startService({ databaseUrl: database.url, port: 18800, env, cpu: 0, nodeArgs: [`--max-semi-space-size=${size}`, ...v8Options, '--require', probe] })
      load ??= await meLoader(service.base, { username: 'gcuser', email: 'gc-user@example.com', password: 'Bench12345' })
      await load(service, 2)
      const f = await load(service, Number(seconds))
      await service.stop()
      const gc = JSON.parse(readFileSync(join(probeDir, `gc-${service.pid}.json`), 'utf8'))
      // The loaded window, by the service's clock: its last `seconds`.
      const end = Math.max(...gc.old.map(([t]) => t))
      const from = end - Number(seconds) * 1000
      const minor = gc.minor.filter(([t]) => t >= from)
      const major = gc.major.filter(([t]) => t >= from)
      const mean = minor.reduce((a, [, d]) => a + d, 0) / minor.length
      const old = gc.old.filter(([t]) => t >= from).map(([, mb]) => mb)
      const row = { semi, rate: Math.round(f.rate), cpu: Math.round(f.cpu), p99: f.p99, rss: +f.rssMeanMB.toFixed(1), scavenges: minor.length, scavengeMs: +mean.toFixed(2), majors: major.length, oldMin: Math.min(...old), oldMax: Math.max(...old) }
      rows.push(row)
      console.log(JSON.stringify(row))
    }
  }
  for (const semi of sizes.split(',')) {
    const r = rows.filter((x) => x.semi === semi)
    const avg = (k) => (r.reduce((a, x) => a + x[k], 0) / r.length).toFixed(1)
    console.log(`semi ${semi}: rate ${avg('rate')}, cpu ${avg('cpu')} µs, p99 ${avg('p99')}, rss ${avg('rss')} MB, scavenge ${avg('scavengeMs')} ms, slow-scavenge instances ${r.filter((x) => x.scavengeMs > 4).length}/${r.length}`)
  }
} finally {
  await sink?.close()
  await database.drop()
  rmSync(probeDir, { recursive: true, force: true })
}
