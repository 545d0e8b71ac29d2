// The request log line in-process, as the service writes it per request: Fastify's child logger
// with the request id, then the line itself, through the production logger options (src/telemetry/logger.ts and request-log.ts,
// from the build) into /dev/null. "redacted" writes the line through that child, with pino's
// redaction; "as built" through requestLogHook's logger without redaction. Prints CPU a line and
// young-generation collections (scavenges) per 200,000 lines, three rounds alternated; run it
// with the service's `--max-semi-space-size=8` so the collections compare with the service's.
// Usage: npm run build && node --max-semi-space-size=8 bench/log-line.js
import { openSync } from 'node:fs'
import { PerformanceObserver } from 'node:perf_hooks'
import pino from 'pino'
import { loggerOptions } from '../dist/telemetry/logger.js'
import { requestLogHook } from '../dist/telemetry/request-log.js'

// The production options, with the service's kind of destination pointed at /dev/null.
const options = loggerOptions({ profile: 'production', logLevel: 'info' })
const root = pino(options, pino.destination({ dest: openSync('/dev/null', 'w'), sync: true, minLength: 4096 }))
const reqId = 'a3f1c2d4-1111-2222-3333-444455556666'
const request = (log) => ({ id: reqId, log, method: 'GET', url: '/users/me', routeOptions: { url: '/users/me' } })
const reply = { statusCode: 200, elapsedTime: 1.234 }
const asBuilt = requestLogHook(root)
const noop = () => {}
const ways = {
  redacted: () => root.child({ reqId }).info({ method: 'GET', path: '/users/me', statusCode: 200, responseTime: 1.23 }, 'request completed'),
  'as built': () => asBuilt(request(root.child({ reqId })), reply, noop)
}

let scavenges = 0
new PerformanceObserver((list) => { for (const entry of list.getEntries()) if (entry.detail?.kind === 1) scavenges++ }).observe({ entryTypes: ['gc'] })
const settle = () => new Promise((resolve) => setTimeout(resolve, 50))
const lines = 200_000
for (let round = 0; round < 3; round++) {
  for (const [name, write] of Object.entries(ways)) {
    await settle()
    scavenges = 0
    const started = process.cpuUsage()
    for (let i = 0; i < lines; i++) write()
    const used = process.cpuUsage(started)
    await settle()
    console.log(`round ${round + 1}, ${name}: ${((used.user + used.system) / lines).toFixed(2)} µs a line, ${scavenges} scavenges`)
  }
}
