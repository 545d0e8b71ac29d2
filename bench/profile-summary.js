// Summarises a `node --cpu-prof` profile of the service by what the time was spent on.
// Each sample goes to the innermost frame of the stack that belongs to a package or to our
// dist/ code (so a socket write made by postgres.js counts as the database driver's, one made
// by Fastify's reply as the HTTP response's); samples with no such frame are named by their
// innermost node: built-in or their V8 pseudo-frame (GC, program). Async hooks' own frames
// (AsyncLocalStorage's context, with tracing on) are named apart, whoever made the promise.
// Idle samples and module loading (start-up) are left out; percentages are of the rest, the
// busy time. `--per=N` also gives µs per request for N requests; `--last=S` keeps only the last S
// seconds of samples (a load that ran just before the service stopped).
// Usage: node bench/profile-summary.js bench/CPU.….cpuprofile [--per=123456] [--last=10]
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

// Where each frame belongs, by URL (first match wins), then by function name for code without one.
const BODY = 'body parsing and validation (secure-json-parse, Ajv)'
const CATEGORIES = [
  ['logging (pino, the request log line)', /node_modules\/(pino|sonic-boom|fast-redact|@pinojs|thread-stream|quick-format-unescaped|safe-stable-stringify)\/|dist\/telemetry\/(logger|security-events)\.js/],
  ['metrics (prom-client, onResponse hook)', /node_modules\/prom-client\/|dist\/(plugins|telemetry)\/metrics\.js/],
  ['JWT verify (@fastify/jwt, fast-jwt)', /node_modules\/(@fastify\/jwt|fast-jwt|steed|mnemonist|@lukeed\/ms|asn1\.js)\/|dist\/tokens\//],
  ['auth hook (our code)', /dist\/plugins\/auth\.js/],
  ['database driver (postgres.js, Drizzle, the look-up\'s DataLoader)', /node_modules\/(postgres|drizzle-orm|dataloader)\/|dist\/db\/|dist\/users\/users-repository\.js/],
  ['response serialisation (fast-json-stringify)', /node_modules\/(fast-json-stringify|json-schema-ref-resolver|fast-uri)\//],
  [BODY, /node_modules\/(secure-json-parse|ajv|ajv-formats|@fastify\/ajv-compiler)\/|dist\/(http\/validation|plugins\/json-body)\.js/],
  ['tracing: @fastify/otel and our span code', /node_modules\/@fastify\/otel\/|dist\/telemetry\/(otel|spans)\.js/],
  ['tracing: span export (OTLP serialisation, sending)', /node_modules\/@opentelemetry\/(otlp-|exporter-)|dist\/telemetry\/span-export\.js/],
  ['tracing: the SDK\'s spans, ids, sampler, context', /node_modules\/@opentelemetry\//],
  ['route handler and app hooks (our code)', /^(?!.*node_modules\/).*\/dist\//],
  ['Fastify core (routing, hooks, request, reply)', /node_modules\/(fastify|find-my-way|avvio|light-my-request|@fastify\/[a-z-]+|fastq|toad-cache|abstract-logging|process-warning|rfdc|proxy-addr|forwarded|ipaddr\.js)\//]
]
const ASYNC_CONTEXT = 'async context (async hooks behind AsyncLocalStorage)'
const ASYNC_HOOKS = /^node:(internal\/)?async_hooks$/
const HTTP_CORE = /^node:(_http_|net|events|stream|internal\/(streams|stream_base_commons|http|net|process\/task_queues|timers|event_target|fixed_queue)|timers|string_decoder)/
const COMPILED_VALIDATOR = /^validate\d*$|^anonymous$/

function categoryOf (node) {
  const { url, functionName } = node.callFrame
  for (const [name, pattern] of CATEGORIES) if (pattern.test(url)) return name
  if (url === '' && COMPILED_VALIDATOR.test(functionName) && node.callFrame.lineNumber >= 0 && functionName.startsWith('validate')) return BODY
  return undefined
}

/**
 * A profile's busy time by category and by category and leaf function, in µs; `last` (seconds)
 * keeps only the end of it.
 */
export function summarize (file, { last = 0 } = {}) {
  const profile = JSON.parse(readFileSync(file, 'utf8'))
  // Each sample's time since the profile started, for `last`.
  let clock = 0
  const sampleTimes = profile.timeDeltas.map((delta) => (clock += delta))
  const windowStart = last ? profile.endTime - profile.startTime - last * 1e6 : -Infinity
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)

  // Time of each sample: the gap to the next one (timeDeltas[i + 1]).
  const totals = new Map()
  const leaves = new Map()
  let busy = 0
  let startUpMicros = 0
  profile.samples.forEach((id, i) => {
    const micros = profile.timeDeltas[i + 1] ?? 0
    const leaf = byId.get(id)
    if (leaf.callFrame.functionName === '(idle)' || sampleTimes[i] < windowStart) return
    let category
    let startUp = false
    for (let node = leaf; node; node = byId.get(parent.get(node.id))) {
      category ??= categoryOf(node)
      startUp ||= /^node:internal\/modules\//.test(node.callFrame.url)
    }
    // Socket writes are the kernel's work for whoever wrote: named apart, since the ceilings pay them too.
    if (leaf.callFrame.url === '' && /^write(v|Buffer|Utf8String|Latin1String)$/.test(leaf.callFrame.functionName)) category = `socket writes by ${category ?? 'node:http'}`
    if (ASYNC_HOOKS.test(leaf.callFrame.url)) category = ASYNC_CONTEXT
    if (startUp) {
      startUpMicros += micros
      return
    }
    busy += micros
    if (!category) {
      const { url, functionName } = leaf.callFrame
      category = functionName.startsWith('(') ? functionName
        : HTTP_CORE.test(url) ? 'node:http, sockets, streams, events (the ceilings too)'
          : url.startsWith('node:') ? `node core: ${url.replace(/^node:internal\//, '').split('/')[0]}`
            : `other: ${functionName || '(native)'} ${url.split('/').slice(-2).join('/')}`
    }
    totals.set(category, (totals.get(category) ?? 0) + micros)
    const leafName = `${leaf.callFrame.functionName || '(anonymous)'} ${leaf.callFrame.url.split('/').slice(-2).join('/')}`
    leaves.set(`${category} | ${leafName}`, (leaves.get(`${category} | ${leafName}`) ?? 0) + micros)
  })
  return { duration: profile.endTime - profile.startTime, startUpMicros, busy, totals, leaves }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const file = process.argv[2]
  const per = Number(process.argv.find((arg) => arg.startsWith('--per='))?.slice(6) ?? 0)
  const last = Number(process.argv.find((arg) => arg.startsWith('--last='))?.slice(7) ?? 0)
  const { duration, startUpMicros, busy, totals, leaves } = summarize(file, { last })
  console.log(`${file}: ${(duration / 1e6).toFixed(1)} s profiled, ${(startUpMicros / 1e6).toFixed(1)} s loading modules (left out), ${(busy / 1e6).toFixed(1)} s busy otherwise${per ? `, ${per} requests: ${(busy / per).toFixed(1)} µs busy each` : ''}\n`)
  console.log(`| category | share of busy time |${per ? ' µs per request |' : ''}\n|---|---|${per ? '---|' : ''}`)
  for (const [category, micros] of [...totals].sort((a, b) => b[1] - a[1])) {
    console.log(`| ${category} | ${((micros / busy) * 100).toFixed(1)}% |${per ? ` ${(micros / per).toFixed(1)} |` : ''}`)
  }
  console.log('\nLargest self times (category | function):')
  for (const [name, micros] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 25))) console.log(`${((micros / busy) * 100).toFixed(1).padStart(5)}%  ${name}`)
}
