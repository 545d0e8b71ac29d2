import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'pino'
import { unmatchedPath } from '../http/request-path.js'

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
