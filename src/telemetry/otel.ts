import { setTimeout as sleep } from 'node:timers/promises'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import fp from 'fastify-plugin'
import { SpanKind, SpanStatusCode, trace, type Context, type Span, type TextMapGetter, type TextMapPropagator, type TextMapSetter } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace'
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyRequest } from 'fastify'
import type { TracingConfig } from '../config/tracing.js'
import { sqlStateOf } from '../db/pg-errors.js'
import { UNMATCHED_ROUTE } from '../http/request-path.js'
import { installTracer } from './spans.js'
import { boundedExport, collectorWatch, type DroppedReason } from './span-export.js'

/** The ids a request's log lines carry, so they join its trace. */
export interface TraceLogFields { trace_id: string, span_id: string }

export interface Tracing {
  /** @fastify/otel's plugin: registered before any route, so that every route has its server span. */
  readonly plugin: FastifyPluginAsync
  /** The request's trace and server span ids, once its span has started. */
  logFields (request: FastifyRequest): TraceLogFields | undefined
  /** Exports what is queued, within `timeoutMs` whatever the collector does, and stops. */
  shutdown (timeoutMs?: number): Promise<void>
}

export interface TracingOptions {
  readonly config: TracingConfig
  /** Spans given up: the queue was full (a slow or absent collector) or their export failed. */
  readonly onDropped: (reason: DroppedReason, count: number) => void
  /** Where the collector's failures and return are said (span-export.ts's collectorWatch). */
  readonly log?: FastifyBaseLogger
}

/**
 * W3C trace context, of which an incoming request keeps only the parent: its ids and sampled
 * flag. A `tracestate` is whatever the caller wrote (an e-mail, a token) and would go out on every
 * span of the request; a client's trace context is only a parent id (issue 26). No baggage either.
 */
class ParentOnlyPropagator implements TextMapPropagator {
  readonly #w3c = new W3CTraceContextPropagator()

  inject (context: Context, carrier: unknown, setter: TextMapSetter): void {
    this.#w3c.inject(context, carrier, setter)
  }

  extract (context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const extracted = this.#w3c.extract(context, carrier, getter)
    const parent = trace.getSpanContext(extracted)
    return parent?.traceState === undefined ? extracted : trace.setSpanContext(extracted, { ...parent, traceState: undefined })
  }

  fields (): string[] {
    return this.#w3c.fields()
  }
}

/**
 * The OpenTelemetry Node SDK, configured by the standard OTEL_* variables (endpoint, protocol,
 * headers, service name, resource attributes, sampler, batch sizes), exporting spans over
 * OTLP/HTTP; metrics stay on the Prometheus endpoint and logs on stdout.
 */
export async function startTracing ({ config, onDropped, log }: TracingOptions): Promise<Tracing> {
  // The exporter of the protocol asked for; both read OTEL_EXPORTER_OTLP_* alike. (The SDK itself
  // loads every exporter it knows, whichever is used.)
  const { OTLPTraceExporter } = config.protocol === 'http/json'
    ? await import('@opentelemetry/exporter-trace-otlp-http')
    : await import('@opentelemetry/exporter-trace-otlp-proto')
  const exporter = boundedExport(new OTLPTraceExporter(), { maxQueue: config.batch.maxQueueSize, onDropped, onExported: log && collectorWatch(log) })
  // Every reason's count exists from the start, at 0: a rate over it sees the first drops.
  for (const reason of ['queue_full', 'export_failed'] as const) onDropped(reason, 0)
  const sdk = new NodeSDK({
    spanProcessors: [exporter.guard(new BatchSpanProcessor({ exporter, ...config.batch }))],
    textMapPropagator: new ParentOnlyPropagator(),
    metricReaders: [],
    logRecordProcessors: []
  })
  sdk.start()

  const ids = new WeakMap<FastifyRequest, TraceLogFields>()
  const instrumentation = new FastifyOtelInstrumentation({
    // A span per hook more than doubles what a traced request costs, and the handler's span
    // nearly doubles what each request exports (docs/performance.md); the statement, hash and
    // Redis spans, direct children of the request's, already show where it waited.
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook (span: Span, request: FastifyRequest) {
      // The route's pattern names the span, never the path a client typed (ids, e-mails, a query).
      const route = request.routeOptions.url
      span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
      span.setAttributes({ 'url.path': route ?? UNMATCHED_ROUTE, 'url.scheme': request.protocol, 'request.id': request.id })
      const { traceId, spanId } = span.spanContext()
      const fields = { trace_id: traceId, span_id: spanId }
      ids.set(request, fields)
      // Every later line of the request's logger carries them (pino's documented setBindings).
      ;(request.log as FastifyBaseLogger & { setBindings (bindings: object): void }).setBindings(fields)
    }
  })
  instrumentation.setTracerProvider(trace.getTracerProvider())

  const tracer = trace.getTracer('user-management-service')
  installTracer({
    inSpan (name, attributes, work, kind = 'internal') {
      return tracer.startActiveSpan(name, { attributes, kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL }, async (span) => {
        try {
          return await work(span)
        } catch (error) {
          span.setStatus({ code: SpanStatusCode.ERROR })
          span.setAttribute('error.type', errorType(error))
          throw error
        } finally {
          span.end()
        }
      })
    }
  })

  const fastifyOtel = instrumentation.plugin()
  return {
    plugin: fp(async function tracingPlugin (app) {
      // A hook of every route, so it runs before @fastify/otel's onSend, which each route adds
      // for itself and which ends the server span: a 5xx names its status in `error.type`, as
      // HTTP's semantic conventions ask.
      app.addHook('onSend', (request, reply, payload, done) => {
        if (reply.statusCode >= 500) request.opentelemetry().span?.setAttribute('error.type', String(reply.statusCode))
        done(null, payload)
      })
      await app.register(fastifyOtel)
    }, { fastify: '5.x', name: 'tracing' }),
    logFields: (request) => ids.get(request),
    async shutdown (timeoutMs = 2000) {
      installTracer(undefined)
      // An unreferenced timer: it never holds the process up once the SDK is done.
      await Promise.race([sdk.shutdown().catch(() => {}), sleep(timeoutMs, undefined, { ref: false })])
    }
  }
}

/** The error's class, and its SQLSTATE or Node code when it has one: never its message. */
function errorType (error: unknown): string {
  const name = (error as Error | undefined)?.constructor?.name ?? typeof error
  const code = sqlStateOf(error) ?? (error as { code?: unknown } | undefined)?.code
  return typeof code === 'string' && /^[A-Z0-9_]{1,32}$/.test(code) ? `${name} ${code}` : name
}
