import type { FastifyBaseLogger, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import type { Config } from '../config/index.js'
import pino, { type Bindings, type ChildLoggerOptions } from 'pino'
import { describeError, type SerializedError } from './error-description.js'

/**
 * Secrets that must never reach a log line, wherever they appear. Nothing logs bodies or
 * headers on purpose; these catch an error object or a debugging line that would.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie',
  'password', '*.password', 'body.password', 'req.body.password',
  'token', '*.token', 'body.token', 'passwordHash', '*.passwordHash'
]

type Destination = ReturnType<typeof pino.destination>
const buffered = new Set<Destination>()

/**
 * Pino flushes only its asynchronous destinations when the process exits: the lines a
 * synchronous one still buffers (under 4 KiB) are written here, so a crash or shutdown that
 * ends in process.exit loses none.
 */
function flushedOnExit (stream: Destination): Destination {
  if (buffered.size === 0) {
    process.once('exit', () => {
      for (const pending of buffered) {
        try { pending.flushSync() } catch { /* stdout is gone: nowhere left to write */ }
      }
    })
  }
  buffered.add(stream)
  return stream
}

/** Pino options shared by every profile: level, redaction and the error serializer. */
export function baseLoggerOptions (config: Pick<Config, 'logLevel'>) {
  return {
    level: config.logLevel,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    // Replaces pino's, which copies every field of an error, message and SQL parameters included.
    serializers: { err: (error: unknown) => describeError(error) as SerializedError & { stack: string } }
  }
}

/** Pino's `time` field in ISO-8601 UTC, formatted once a millisecond: the lines of one share it. */
function isoTimestamp (): () => string {
  let at = -1
  let text = ''
  return () => {
    const now = Date.now()
    if (now !== at) {
      at = now
      text = `,"time":"${new Date(now).toISOString()}"`
    }
    return text
  }
}

/** Pino JSON in production, readable lines in development: chosen by the profile, never by NODE_ENV. */
export function loggerOptions (config: Config): FastifyServerOptions['logger'] {
  const base = baseLoggerOptions(config)
  // Stdout written 4 KiB at a time or every 250 ms, whichever comes first, so that a request does
  // not cost a write(2) of its own. Written from the main thread (pino's default), not handed to a
  // libuv thread that would compete with it for the core.
  if (config.profile === 'production') {
    const stream = flushedOnExit(pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: 250 }))
    return { ...base, timestamp: isoTimestamp(), stream }
  }
  return { ...base, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}

/**
 * An unmatched request's path as its log line shows it: without the query string, and without
 * any segment that may hold an e-mail (an `@`, written or percent-encoded), which the request did
 * not prove (CONTRACT §7).
 */
export function unmatchedPath (url: string): string {
  return url.split('?')[0].slice(0, 256).split('/').map((segment) => mayHoldEmail(segment) ? '[redacted]' : segment).join('/')
}

/** An at sign, ASCII or look-alike, written or percent-encoded any number of times (up to three). */
function mayHoldEmail (segment: string): boolean {
  let text = segment
  for (let round = 0; round < 4; round++) {
    if (/[@\uFF20\uFE6B]/.test(text)) return true
    if (!text.includes('%')) return false
    try {
      // A stray % (not an escape) stands for itself.
      text = decodeURIComponent(text.replace(/%(?![0-9a-f]{2})/gi, '%25'))
    } catch {
      // Escapes that are not UTF-8: each byte alone.
      text = text.replace(/%[0-9a-f]{2}/gi, (escape) => String.fromCharCode(parseInt(escape.slice(1), 16)))
    }
  }
  return false
}

/**
 * The one log line of each request (Fastify's own two lines are turned off with
 * `disableRequestLogging`): method, path, status and time (CONTRACT §7). The path is the route's
 * pattern where that has no parameter or wildcard (the same string, nothing to compute); any
 * other shows the request's path without the query string or an e-mail. Its
 * fields are fixed and none can hold a secret, so it is written by a child of the app's logger
 * without the redaction every other line goes through: pino runs each field through the wildcard
 * paths' redactor (`*.password`), work that buys nothing here and weighs on every request.
 */
export function requestLogHook (log: FastifyBaseLogger, traceFields?: (request: FastifyRequest) => { trace_id: string, span_id: string } | undefined) {
  const lines = log.child({}, { redact: [] })
  const pathOf = (request: FastifyRequest) => {
    const pattern = request.routeOptions.url
    return pattern !== undefined && !pattern.includes('*') && !pattern.includes(':') ? pattern : unmatchedPath(request.url)
  }
  const elapsedMs = (reply: FastifyReply) => Math.round(reply.elapsedTime * 100) / 100
  const line = (request: FastifyRequest, reply: FastifyReply) => ({
    reqId: request.id, method: request.method, path: pathOf(request), statusCode: reply.statusCode, responseTime: elapsedMs(reply)
  })
  if (traceFields !== undefined) {
    // With tracing on, the line also names the request's trace and server span.
    return function logTracedRequest (request: FastifyRequest, reply: FastifyReply, done: () => void): void {
      const ids = traceFields(request)
      if (ids === undefined) lines.info(line(request, reply), 'request completed')
      else {
        // One literal, not a spread of two: this runs on every traced request.
        lines.info({
          reqId: request.id, method: request.method, path: pathOf(request), statusCode: reply.statusCode, responseTime: elapsedMs(reply), trace_id: ids.trace_id, span_id: ids.span_id
        }, 'request completed')
      }
      done()
    }
  }
  return function logRequest (request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    lines.info(line(request, reply), 'request completed')
    done()
  }
}

type LogArguments = [unknown, string?, ...unknown[]]

/**
 * `request.log`, made the first time a request logs through it (Fastify's `childLoggerFactory`).
 * Most requests write nothing but their request line, which has its own logger, yet a pino child
 * made for each one runs its request id through every redaction path, `*.password` and the other
 * wildcards included: a child and its redacted bindings per request, for lines never written.
 */
class DeferredChildLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  /** What `setBindings` was given before the child was made. */
  #pending: Bindings | undefined
  readonly #options: ChildLoggerOptions
  #logger: FastifyBaseLogger | undefined

  constructor (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  /** The pino child itself: what any use but reading the level needs. */
  get logger (): FastifyBaseLogger {
    this.#logger ??= this.#parent.child(this.#pending === undefined ? this.#bindings : { ...this.#bindings, ...this.#pending }, this.#options)
    return this.#logger
  }

  get level (): string { return this.#logger?.level ?? this.#options.level ?? this.#parent.level }
  set level (level: string) { this.logger.level = level }

  fatal (...args: LogArguments): void { this.logger.fatal(...args) }
  error (...args: LogArguments): void { this.logger.error(...args) }
  warn (...args: LogArguments): void { this.logger.warn(...args) }
  info (...args: LogArguments): void { this.logger.info(...args) }
  debug (...args: LogArguments): void { this.logger.debug(...args) }
  trace (...args: LogArguments): void { this.logger.trace(...args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options)
  }

  /** pino's, for the trace ids (telemetry/otel.ts): kept for the child until it is made. */
  setBindings (bindings: Bindings): void {
    if (this.#logger === undefined) this.#pending = this.#pending === undefined ? bindings : { ...this.#pending, ...bindings }
    else (this.#logger as FastifyBaseLogger & { setBindings (bindings: Bindings): void }).setBindings(bindings)
  }
}

/** Fastify's `childLoggerFactory`: each request's logger, deferred until it is used. */
export function deferredChildLogger (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new DeferredChildLogger(parent, bindings, options)
}

/**
 * A warning that says itself at most once a minute, however often its cause repeats. `kind`
 * gives each distinct cause its own minute (a connection refused must not hide a password
 * Redis rejects); `reset` lets the next occurrence speak at once (a new outage after a recovery).
 */
export function throttledWarning (log: FastifyBaseLogger, message: string, intervalMs = 60_000) {
  const last = new Map<string, number>()
  const warn = (details: object = {}, kind = ''): void => {
    const now = Date.now()
    if (now - (last.get(kind) ?? -Infinity) < intervalMs) return
    // Kinds are error codes, a handful; the cap only guards against a cause that varies without end.
    if (last.size >= 32 && !last.has(kind)) last.clear()
    last.set(kind, now)
    log.warn(details, message)
  }
  return Object.assign(warn, { reset: () => last.clear() })
}
