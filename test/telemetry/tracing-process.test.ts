import { setTimeout as sleep } from 'node:timers/promises'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import { MODULE_LOG, freePort, http, loadedModules, spawnServer, waitReady, type ServerProcess } from '../server-process.js'
import { otlpReceiver } from '../support/otlp-receiver.js'
import { until } from '../deploy/processes.js'

// The real process: which modules it loads, what its collector's faults cost it, how it stops.
t.setTimeout(300_000)

const OTEL_MODULE = /@opentelemetry|@fastify[/+]otel/
const TOKEN_MISSING = { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }
const parsed = (text: string): unknown => { try { return JSON.parse(text) } catch { return text } }

const ports = async () => ({ PORT: String(await freePort()), MANAGEMENT_PORT: String(await freePort()) })
const cheap = { ARGON2_MEMORY_KIB: '1024', ARGON2_ITERATIONS: '1', LOG_LEVEL: 'warn' }

async function stop (server: ServerProcess): Promise<{ exit: unknown, ms: number }> {
  const started = Date.now()
  server.child.kill('SIGTERM')
  const exit = await server.exited
  return { exit, ms: Date.now() - started }
}

const droppedSpans = async (managementPort: number, reason: string): Promise<number> => {
  const text = (await http(managementPort, 'GET', '/metrics')).body
  const line = text.split('\n').find((l) => l.startsWith(`otel_spans_dropped_total{reason="${reason}"}`))
  return Number(line?.split(' ').at(-1) ?? 0)
}

// Both processes start at once: each test then waits for its own.
const offEnv = await ports()
const offServer = spawnServer(t, { ...offEnv, ...cheap }, MODULE_LOG)
const receiver = await otlpReceiver(t)
const onEnv = await ports()
const onServer = spawnServer(t, {
  ...onEnv,
  ...cheap,
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
  OTEL_SERVICE_NAME: 'ums-process-test',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '50',
  OTEL_BSP_MAX_QUEUE_SIZE: '10',
  OTEL_EXPORTER_OTLP_TIMEOUT: '500',
  // The collector's failures are warnings, its return an info line.
  LOG_LEVEL: 'info'
}, MODULE_LOG)
// The shipped default: OTLP in protobuf.
const protobufReceiver = await otlpReceiver(t)
const protobufEnv = await ports()
const protobufServer = spawnServer(t, { ...protobufEnv, ...cheap, OTEL_EXPORTER_OTLP_ENDPOINT: protobufReceiver.endpoint, OTEL_BSP_SCHEDULE_DELAY: '50' })

t.test('tracing off (no OTLP endpoint): nothing of OpenTelemetry loads but the API prom-client always loaded', async (t) => {
  const [env, server] = [offEnv, offServer]
  await waitReady(server)
  const answer = await http(Number(env.PORT), 'GET', '/users/me')
  t.strictSame([answer.status, answer.json()], [401, TOKEN_MISSING])
  t.strictSame((await stop(server)).exit, { code: 0, signal: null })
  const modules = loadedModules(server)
  t.ok(modules.some((url) => url.includes('/fastify/')), 'the list holds what the process loaded')
  // prom-client's default metrics have always required @opentelemetry/api, the no-op API (for
  // exemplars): nothing of the SDK, the exporter or the instrumentation may join it.
  const packages = new Set(modules.filter((url) => OTEL_MODULE.test(url)).map((url) => /(@opentelemetry|@fastify)[/+][^/]+/.exec(url)![0]))
  t.strictSame([...packages], ['@opentelemetry/api'], 'OpenTelemetry\'s API alone, as prom-client loads it')
  t.ok(modules.some((url) => url.includes('/prom-client/lib/metrics/processCpuTotal.js')), 'which prom-client does')
})

t.test('a collector that refuses, black-holes and comes back: every answer as usual, spans dropped and counted, a clean exit', async (t) => {
  const [env, server] = [onEnv, onServer]
  const managementPort = Number(env.MANAGEMENT_PORT)
  await waitReady(server)
  const port = Number(env.PORT)

  /** Requests one after another, each answered with the contract's 401 within a second. */
  async function traffic (count: number, label: string) {
    let slowest = 0
    for (let i = 0; i < count; i++) {
      const started = Date.now()
      const answer = await http(port, 'GET', '/users/me', { timeoutMs: 5000 })
      slowest = Math.max(slowest, Date.now() - started)
      if (answer.status !== 401 || !isDeepStrictEqual(parsed(answer.body), TOKEN_MISSING)) t.fail(`${label}: ${answer.status} ${answer.body}`)
    }
    t.ok(slowest < 1000, `${label}: ${count} answers, the slowest in ${slowest} ms`)
  }

  // Each reason's series exists before its first drop, so that a rate over it sees that drop.
  const series = (await http(managementPort, 'GET', '/metrics')).body.split('\n').filter((line) => line.startsWith('otel_spans_dropped_total{'))
  t.strictSame(series, ['otel_spans_dropped_total{reason="queue_full"} 0', 'otel_spans_dropped_total{reason="export_failed"} 0'])
  const failing = 'traces: the collector did not take a batch; its spans are dropped (otel_spans_dropped_total) until it does'
  const back = 'traces: the collector takes batches again'
  const said = (message: string) => server.stdout().split(message).length - 1
  // Outages in the log: a warning that follows a return (or none) begins one; the warnings after
  // it in the same outage name its other causes.
  const outages = () => {
    const edges = server.stdout().split('\n').filter((line) => line.includes(failing) || line.includes(back)).map((line) => line.includes(back) ? 'back' : 'down')
    return { began: edges.filter((edge, i) => edge === 'down' && edges[i - 1] !== 'down').length, ended: said(back) }
  }
  await traffic(5, 'collector up')
  const first = await receiver.until((spans) => spans.some((span) => span.name === 'GET /users/me'))
  t.equal(first.find((span) => span.name === 'GET /users/me')?.attributes['http.response.status_code'], 401, 'spans arrive while the collector takes them')

  receiver.setMode('refuse')
  await traffic(20, 'collector refusing')
  await sleep(300)
  t.ok(await droppedSpans(managementPort, 'export_failed') > 0, 'refused exports are counted as dropped spans')
  // Once, or twice where an export sent before the refusals began came back after the first
  // of them (a short return, said as such): never a line a batch.
  const { began, ended } = outages()
  t.ok(began >= 1 && began <= 2 && ended === began - 1, `the log says the collector failed: ${began} outages begun, ${ended} ended`)

  receiver.setMode('black-hole')
  // More spans than the queue holds, while each export waits out its 500 ms.
  await traffic(60, 'collector black-holed')
  t.ok(await droppedSpans(managementPort, 'queue_full') > 0, 'a full queue drops spans, counted')

  receiver.setMode('accept')
  const before = receiver.spans.length
  await traffic(5, 'collector back')
  await receiver.until((spans) => spans.length > before && spans.slice(before).some((span) => span.name === 'GET /users/me'))
  t.pass('spans arrive again once the collector is back')
  await until('the log saying so', () => outages().ended === outages().began)
  t.pass('the log says the collector takes batches again')

  // A black-holed collector at the end costs the shutdown at most the tracer's 2 s bound.
  receiver.setMode('black-hole')
  await traffic(5, 'collector black-holed again')
  const { exit, ms } = await stop(server)
  t.strictSame(exit, { code: 0, signal: null }, `SIGTERM: exit 0 after ${ms} ms`)
  t.ok(ms < 8000, 'within the shutdown\'s bounds')
  const loaded = loadedModules(server)
  t.ok(['@fastify/otel', '@opentelemetry/sdk-node', '@opentelemetry/exporter-trace-otlp-http'].every((name) => loaded.some((url) => url.includes(`/${name}/`))), 'tracing on: the SDK, exporter and instrumentation are loaded (the check above can see them)')
})

t.test('with no protocol set, spans go out as OTLP protobuf', async (t) => {
  await waitReady(protobufServer)
  const answer = await http(Number(protobufEnv.PORT), 'GET', '/users/me')
  t.equal(answer.status, 401)
  t.strictSame(answer.json(), TOKEN_MISSING)
  const deadline = Date.now() + 10_000
  while (!protobufReceiver.contentTypes.includes('application/x-protobuf') && Date.now() < deadline) await sleep(50)
  t.strictSame([...new Set(protobufReceiver.contentTypes)], ['application/x-protobuf'], 'every export in protobuf')
  t.strictSame((await stop(protobufServer)).exit, { code: 0, signal: null })
})
