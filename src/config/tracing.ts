import { ConfigError } from './config-error.js'
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
  checkKeyValues('OTEL_EXPORTER_OTLP_HEADERS', env.OTEL_EXPORTER_OTLP_HEADERS, 'header')
  checkKeyValues('OTEL_EXPORTER_OTLP_TRACES_HEADERS', env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, 'header')
  checkKeyValues('OTEL_RESOURCE_ATTRIBUTES', env.OTEL_RESOURCE_ATTRIBUTES, 'attribute')
  if (env.OTEL_SDK_DISABLED?.toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return undefined
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

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
// Control characters but the tab: a header value cannot carry them (Node refuses it, and the export fails).
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/

/**
 * OpenTelemetry's `key=value,…` lists, read as the SDK reads them (each part percent-decoded):
 * the SDK drops an entry it cannot read without a word, so a collector's key would be missing
 * from every export, or a resource attribute from every span. The value is never quoted back:
 * a header may hold a secret.
 */
function checkKeyValues (variable: string, value: string | undefined, kind: 'header' | 'attribute'): void {
  if (value === undefined) return
  const rule = kind === 'header'
    ? 'must be a comma-separated list of name=value pairs, each name a header name and each value percent-encoded (a ; as %3B) without control characters'
    : 'must be a comma-separated list of key=value pairs, each percent-encoded (an = as %3D) and at most 255 characters decoded'
  value.split(',').forEach((entry, index) => {
    if (entry.trim() === '') return
    const at = entry.indexOf('=')
    const [key, text] = [decoded(entry.slice(0, Math.max(at, 0)).trim()), decoded(entry.slice(at + 1).trim())]
    // The SDK's readers: a header's value ends at a raw `;` (baggage's metadata) and must not be
    // empty; an attribute's entry has exactly one raw `=`, and its value may be empty.
    const valid = at > 0 && key !== undefined && key !== '' && text !== undefined && (kind === 'header'
      ? text !== '' && !entry.includes(';') && HEADER_NAME.test(key) && !CONTROL.test(text)
      : !entry.slice(at + 1).includes('=') && key.length <= 255 && text.length <= 255)
    if (!valid) throw new ConfigError(variable, `${rule} (entry ${index + 1} is not)`)
  })
}

function decoded (text: string): string | undefined {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}
