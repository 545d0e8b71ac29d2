import type { FastifyBaseLogger, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'
import pino from 'pino'

/**
 * Secrets that must never reach a log line, wherever they appear. Nothing logs bodies or
 * headers on purpose; these catch an error object or a debugging line that would.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie',
  'password', '*.password', 'body.password', 'req.body.password',
  'token', '*.token', 'body.token', 'passwordHash', '*.passwordHash'
]

/** Pino options shared by every profile: level and redaction. */
export function baseLoggerOptions (config: Pick<Config, 'logLevel'>) {
  return { level: config.logLevel, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }
}

/** Pino JSON in production, readable lines in development: chosen by the profile, never by NODE_ENV. */
export function loggerOptions (config: Config): FastifyServerOptions['logger'] {
  const base = baseLoggerOptions(config)
  // Asynchronous stdout: lines queue while a write is in flight and leave together, instead of
  // one synchronous write(2) each (11% of GET /users/me's CPU: BENCHMARKS.md). Pino flushes it
  // synchronously on exit, so a crash that ends in process.exit loses no line.
  if (config.profile === 'production') {
    return { ...base, timestamp: () => `,"time":"${new Date().toISOString()}"`, stream: pino.destination({ dest: 1, sync: false }) }
  }
  return { ...base, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}

/**
 * The one log line of each request (Fastify's own two lines are turned off with
 * `disableRequestLogging`). The route is the pattern, so ids and e-mails in paths stay out of
 * the log; an unmatched request shows its path without the query string. `reqId` comes from
 * the request's child logger.
 */
export async function logRequest (request: FastifyRequest, reply: FastifyReply): Promise<void> {
  request.log.info({
    method: request.method,
    route: request.routeOptions.url ?? request.url.split('?')[0].slice(0, 256),
    statusCode: reply.statusCode,
    responseTime: Math.round(reply.elapsedTime * 100) / 100
  }, 'request completed')
}

/** A warning that says itself at most once a minute, however often its cause repeats. */
export function throttledWarning (log: FastifyBaseLogger, message: string, intervalMs = 60_000) {
  let last = -Infinity
  return (details: object = {}): void => {
    const now = Date.now()
    if (now - last < intervalMs) return
    last = now
    log.warn(details, message)
  }
}
