import type { FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'

/** Secrets that must never reach a log line, wherever they appear. */
export const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
  'password', '*.password', 'body.password', 'token', '*.token', 'passwordHash', '*.passwordHash'
]

/** Pino JSON in production, readable lines in development: chosen by the profile, never by NODE_ENV. */
export function loggerOptions (config: Config): FastifyServerOptions['logger'] {
  const base = { level: config.logLevel, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }
  if (config.profile === 'production') return { ...base, timestamp: () => `,"time":"${new Date().toISOString()}"` }
  return { ...base, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}
