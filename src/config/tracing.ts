import type { Env } from './env.js'

/** What the service itself needs of tracing; the SDK reads the rest of OTEL_* on its own. */
export interface TracingConfig {
  /** How spans travel: OTLP over HTTP, protobuf (the default) or JSON. */
  readonly protocol: 'http/protobuf' | 'http/json'
  /** The batch span processor's OTEL_BSP_* settings, the SDK's defaults where unset. */
  readonly batch: {
    /** Spans waiting for export at most; more are dropped, and counted. */
    readonly maxQueueSize: number
    readonly maxExportBatchSize: number
    readonly scheduledDelayMillis: number
    readonly exportTimeoutMillis: number
  }
}

/**
 * Tracing is on when an OTLP endpoint is set, and nothing else needs setting; OTEL_SDK_DISABLED=true
 * or OTEL_TRACES_EXPORTER=none turn it off again. Off, no OpenTelemetry module is loaded.
 */
export function tracingConfig (env: Env): TracingConfig | undefined {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT === undefined && env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT === undefined) return undefined
  const maxQueueSize = env.OTEL_BSP_MAX_QUEUE_SIZE ?? 2048
  return {
    protocol: env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    batch: {
      maxQueueSize,
      maxExportBatchSize: Math.min(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE ?? 512, maxQueueSize),
      scheduledDelayMillis: env.OTEL_BSP_SCHEDULE_DELAY ?? 5000,
      exportTimeoutMillis: env.OTEL_BSP_EXPORT_TIMEOUT ?? 30_000
    }
  }
}
