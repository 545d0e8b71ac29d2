// What the OpenTelemetry SDK costs for one span, outside any request (issue 26): a span shaped
// like our server span (the method and route @fastify/otel starts it with, without its constant
// `fastify.root`, which adds 33 bytes a span; ours from its requestHook; the status at the end)
// made and ended by the SDK's TracerProvider, then a batch of 512 of them serialized as the
// OTLP/protobuf exporter sends them. No context manager, no network: the floor
// under what a traced request adds, to compare with what it does add (bench/tracing-ab.js).
// Prints the median of 5 runs of each. Usage: taskset -c 0 node bench/span-cost.js
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { TracerProvider } from '@opentelemetry/sdk-trace'
import { median } from './lib.js'

const BATCH = 512
const ended = []
const provider = new TracerProvider({ spanProcessors: [{ onStart () {}, onEnd (span) { ended.push(span) }, forceFlush: async () => {}, shutdown: async () => {} }] })
const tracer = provider.getTracer('span-cost')

function makeBatch () {
  for (let i = 0; i < BATCH; i++) {
    const span = tracer.startSpan('request', { attributes: { 'http.request.method': 'GET', 'url.path': '/users/me', 'http.route': '/users/me' } })
    span.updateName('GET /users/me')
    span.setAttributes({ 'url.path': '/users/me', 'request.id': randomUUID() })
    span.setAttribute('http.response.status_code', 200)
    span.end()
  }
  return ended.splice(0)
}

/** µs per span of `work`, run `rounds` times over a batch. */
function timed (rounds, work) {
  const start = performance.now()
  for (let i = 0; i < rounds; i++) work()
  return ((performance.now() - start) * 1000) / (rounds * BATCH)
}

const spans = makeBatch()
timed(200, makeBatch) // warm-up
timed(200, () => ProtobufTraceSerializer.serializeRequest(spans))
const make = []
const serialize = []
for (let run = 0; run < 5; run++) {
  make.push(timed(200, makeBatch))
  serialize.push(timed(400, () => ProtobufTraceSerializer.serializeRequest(spans)))
}
const bytes = ProtobufTraceSerializer.serializeRequest(spans).length / BATCH
console.log(`span made and ended: ${median(make).toFixed(2)} µs; serialized (OTLP/protobuf, batches of ${BATCH}): ${median(serialize).toFixed(2)} µs, ${bytes.toFixed(0)} bytes (Node ${process.version})`)
