// Summarises a `node --cpu-prof` profile of the service by what the time was spent on.
// Each sample goes to the innermost frame of the stack that belongs to a package or to our
// dist/ code (so a socket write made by postgres.js counts as the database driver's, one made
// by Fastify's reply as the HTTP response's); samples with no such frame are named by their
// innermost node: built-in or their V8 pseudo-frame (GC, program). Idle samples and module
// loading (start-up) are left out; percentages are of the rest, the busy time. `--per=N` also gives µs per request for N requests;
// `--last=S` keeps only the last S seconds of samples (a load that ran just before the service stopped).
// Usage: node bench/profile-summary.js bench/CPU.….cpuprofile [--per=123456] [--last=10]
import { readFileSync } from 'node:fs'

const file = process.argv[2]
const per = Number(process.argv.find((arg) => arg.startsWith('--per='))?.slice(6) ?? 0)
const last = Number(process.argv.find((arg) => arg.startsWith('--last='))?.slice(7) ?? 0)
const profile = JSON.parse(readFileSync(file, 'utf8'))
// Each sample's time since the profile started, for --last.
let clock = 0
const sampleTimes = profile.timeDeltas.map((delta) => (clock += delta))
const windowStart = last ? profile.endTime - profile.startTime - last * 1e6 : -Infinity

// Where each frame belongs, by URL (first match wins), then by function name for code without one.
const CATEGORIES = [
  ['logging (pino, the request log line)', /node_modules\/(pino|sonic-boom|fast-redact|@pinojs|thread-stream|quick-format-unescaped|safe-stable-stringify)\/|dist\/logger\.js|dist\/security-events\.js/],
  ['metrics (prom-client, onResponse hook)', /node_modules\/prom-client\/|dist\/plugins\/metrics\.js/],
  ['JWT verify (@fastify/jwt, fast-jwt)', /node_modules\/(@fastify\/jwt|fast-jwt|steed|mnemonist|@lukeed\/ms|asn1\.js)\//],
  ['auth hook (our code)', /dist\/plugins\/auth\.js/],
  ['database driver (postgres.js, Drizzle)', /node_modules\/(postgres|drizzle-orm)\/|dist\/db\/|dist\/users\/users-repository\.js/],
  ['response serialisation (fast-json-stringify)', /node_modules\/(fast-json-stringify|json-schema-ref-resolver|fast-uri)\//],
  ['body parsing and validation (secure-json-parse, Ajv)', /node_modules\/(secure-json-parse|ajv|ajv-formats|@fastify\/ajv-compiler)\/|dist\/validation\.js/],
  ['route handler and app hooks (our code)', /dist\/(app|routes\/.*|plugins\/(errors|rate-limit|login-limiter|users|db))\.js/],
  ['Fastify core (routing, hooks, request, reply)', /node_modules\/(fastify|find-my-way|avvio|light-my-request|@fastify\/[a-z-]+|fastq|toad-cache|abstract-logging|process-warning|rfdc|proxy-addr|forwarded|ipaddr\.js)\//]
]
const HTTP_CORE = /^node:(_http_|net|events|stream|internal\/(streams|stream_base_commons|http|net|process\/task_queues|timers|event_target|async_hooks|fixed_queue)|timers|string_decoder)/
const COMPILED_VALIDATOR = /^validate\d*$|^anonymous$/

function categoryOf (node) {
  const { url, functionName } = node.callFrame
  for (const [name, pattern] of CATEGORIES) if (pattern.test(url)) return name
  if (url === '' && COMPILED_VALIDATOR.test(functionName) && node.callFrame.lineNumber >= 0 && functionName.startsWith('validate')) return CATEGORIES[6][0]
  return undefined
}

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

const duration = profile.endTime - profile.startTime
console.log(`${file}: ${(duration / 1e6).toFixed(1)} s profiled, ${(startUpMicros / 1e6).toFixed(1)} s loading modules (left out), ${(busy / 1e6).toFixed(1)} s busy otherwise${per ? `, ${per} requests: ${(busy / per).toFixed(1)} µs busy each` : ''}\n`)
console.log(`| category | share of busy time |${per ? ' µs per request |' : ''}\n|---|---|${per ? '---|' : ''}`)
for (const [category, micros] of [...totals].sort((a, b) => b[1] - a[1])) {
  console.log(`| ${category} | ${((micros / busy) * 100).toFixed(1)}% |${per ? ` ${(micros / per).toFixed(1)} |` : ''}`)
}
console.log('\nLargest self times (category | function):')
for (const [name, micros] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 25))) console.log(`${((micros / busy) * 100).toFixed(1).padStart(5)}%  ${name}`)
