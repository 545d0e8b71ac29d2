import { SpanKind, SpanStatusCode, TraceFlags, type Context } from '@opentelemetry/api'
import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace'
import type { FastifyBaseLogger } from 'fastify'
import { dependencyWatch } from './dependency-log.js'

export type DroppedReason = 'queue_full' | 'export_failed'

export interface BoundedExporter extends SpanExporter {
  /**
   * Wraps the batch processor: a span that would find its queue full is dropped here, where it
   * is counted (the SDK's processor drops it just the same, and only says so in its debug log).
   */
  guard (processor: SpanProcessor): SpanProcessor
}

/**
 * The exporter the batch processor hands its batches to. It counts what the collector did not
 * take, and strips every span of what an error may have said: status messages and exception
 * messages and stacks (a driver's message can quote a parameter), keeping the error's class; a
 * server span's 4xx leaves its status unset.
 */
export function boundedExport (exporter: SpanExporter, options: { maxQueue: number, onDropped: (reason: DroppedReason, count: number) => void, onExported?: (error?: Error) => void }): BoundedExporter {
  const { maxQueue, onDropped, onExported } = options
  // Ended spans handed to the processor and not yet to the exporter: its queue.
  let queued = 0
  // Batches go out concurrently: one sent before a batch the collector took, and refused or timed
  // out after it, says nothing of the collector now (a new outage, in the log, that never ends).
  let sent = 0
  let latestTaken = 0
  const bounded: BoundedExporter = {
    export (spans: ReadableSpan[], done: (result: ExportResult) => void): void {
      queued = Math.max(0, queued - spans.length)
      const batch = ++sent
      exporter.export(spans.map(asExported), (result) => {
        if (result.code !== ExportResultCode.SUCCESS) {
          onDropped('export_failed', spans.length)
          if (batch > latestTaken) onExported?.(result.error ?? new Error('export failed'))
        } else {
          latestTaken = Math.max(latestTaken, batch)
          onExported?.()
        }
        done(result)
      })
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    guard (processor: SpanProcessor): SpanProcessor {
      return {
        onStart: (span: Span, parent: Context) => { processor.onStart(span, parent) },
        onEnd (span: ReadableSpan) {
          // The processor keeps sampled spans only.
          if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return processor.onEnd(span)
          if (queued >= maxQueue) return onDropped('queue_full', 1)
          queued++
          processor.onEnd(span)
        },
        forceFlush: () => processor.forceFlush(),
        shutdown: () => processor.shutdown()
      }
    }
  }
  return bounded
}

/** What the collector did with the batches, in the log (without it a wrong endpoint or key showed only in a metric). */
export function collectorWatch (log: FastifyBaseLogger, now = Date.now): (error?: Error) => void {
  const watch = dependencyWatch(log, {
    down: 'traces: the collector did not take a batch; its spans are dropped (otel_spans_dropped_total) until it does',
    back: 'traces: the collector takes batches again'
  }, now)
  return (error) => { if (error === undefined) watch.answered(); else watch.failed(error) }
}

/**
 * HTTP's semantic conventions: a server span's 4xx is the client's error, its status left unset;
 * @fastify/otel marks every error thrown on the way to an answer, a refused login's too.
 */
function statusCodeOf (span: ReadableSpan): SpanStatusCode {
  const clientError = span.kind === SpanKind.SERVER && Number(span.attributes['http.response.status_code']) < 500
  return clientError && span.status.code === SpanStatusCode.ERROR ? SpanStatusCode.UNSET : span.status.code
}

/** The span as exported: its status without a message (unset for a 4xx), exception events with their type only. */
function asExported (span: ReadableSpan): ReadableSpan {
  const code = statusCodeOf(span)
  if (span.status.message === undefined && span.events.length === 0 && code === span.status.code) return span
  const events = span.events.map((event: ReadableSpan['events'][number]) => ({
    name: event.name,
    time: event.time,
    attributes: event.attributes?.['exception.type'] === undefined ? {} : { 'exception.type': event.attributes['exception.type'] }
  }))
  // A view over the SDK's span: every other field and method is the span's own.
  return Object.create(span, { status: { value: { code } }, events: { value: events } })
}
