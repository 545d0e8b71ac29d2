import type { FastifyBaseLogger, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'
import pino from 'pino'
import { isSqlState, speaksPlainly } from './db/pg-errors.js'

/**
 * Secrets that must never reach a log line, wherever they appear. Nothing logs bodies or
 * headers on purpose; these catch an error object or a debugging line that would.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie',
  'password', '*.password', 'body.password', 'req.body.password',
  'token', '*.token', 'body.token', 'passwordHash', '*.passwordHash'
]

/** Errors of the database layer: their messages and fields quote SQL, parameters and stored values. */
const DATABASE_ERROR_TYPES = new Set(['DrizzleQueryError', 'DrizzleError', 'TransactionRollbackError', 'PostgresError', 'DatabaseError'])
const DRIZZLE_WRAPPERS = new Set(['DrizzleQueryError', 'DrizzleError', 'TransactionRollbackError'])
// DrizzleQueryError: query, params; postgres.js: query, parameters (non-enumerable); PostgreSQL: detail, severity.
const DATABASE_ERROR_FIELDS = ['query', 'params', 'parameters', 'detail', 'severity']
/** What an error may say about itself in a log line: codes and names, never a value. */
const SAFE_FIELDS = ['code', 'errno', 'syscall', 'address', 'port', 'hostname', 'statusCode'] as const
const MAX_DEPTH = 5

type ErrorLike = Record<string, unknown> & { name?: unknown, message?: unknown, stack?: unknown, cause?: unknown }

const isErrorLike = (value: unknown): value is ErrorLike =>
  value instanceof Error || (typeof value === 'object' && value !== null && 'message' in value && 'stack' in value)

/**
 * The class name (DrizzleQueryError's `name` is plain "Error"). PGlite's bundle minifies its
 * classes to a letter or two; its errors are pg-protocol's DatabaseError, named "error".
 */
function typeOf (error: ErrorLike): string {
  const className = error.constructor?.name ?? ''
  if (className.length > 2 && className !== 'Object') return className
  return error.name === 'error' ? 'DatabaseError' : String(error.name ?? 'Error')
}

const fromDatabase = (error: ErrorLike) => DATABASE_ERROR_TYPES.has(typeOf(error)) || DATABASE_ERROR_FIELDS.some((field) => field in error)

/** The error and its causes, outermost first (bounded: a chain may loop). */
function chain (error: ErrorLike): ErrorLike[] {
  const links = [error]
  while (links.length < MAX_DEPTH && isErrorLike(links.at(-1)!.cause)) links.push(links.at(-1)!.cause as ErrorLike)
  return links
}

/** Pino's shape of a serialized error, which Fastify's types demand of an `err` serializer. */
interface SerializedError { type: string, message: string, stack?: string, [field: string]: unknown }

const WITHHELD = '[withheld: database error]'

/**
 * Whether a link of an error chain may say its message (CONTRACT §7). PostgreSQL's messages
 * speak for the classes that quote no data (`speaksPlainly`); Drizzle's wrapper always quotes
 * the SQL and its parameters; network, TLS and driver errors name a host at most (their codes
 * are identifiers, ECONNREFUSED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, CONNECTION_CLOSED); any other
 * message in a chain that holds a database error may repeat that error's text.
 */
function messageKept (error: ErrorLike, chainFromDatabase: boolean): boolean {
  const code = typeof error.code === 'string' ? error.code : undefined
  if (isSqlState(code)) return speaksPlainly(code)
  if (DRIZZLE_WRAPPERS.has(typeOf(error))) return false
  if (code !== undefined && /^[A-Z][A-Z0-9_]+$/.test(code)) return true
  return !chainFromDatabase
}

function describe (error: ErrorLike, chainFromDatabase: boolean, withStack: boolean, depth: number): SerializedError {
  const kept = messageKept(error, chainFromDatabase)
  const out: SerializedError = { type: typeOf(error), message: kept ? String(error.message) : WITHHELD }
  for (const field of SAFE_FIELDS) {
    const value = error[field]
    if (typeof value === 'string' || typeof value === 'number') out[field] = value
  }
  const constraint = error.constraint_name ?? error.constraint
  if (typeof constraint === 'string') out.constraint = constraint
  // A stack starts with the message (Drizzle's also appends its cause's): only the frames are safe.
  if (withStack && typeof error.stack === 'string') {
    out.stack = chainFromDatabase ? error.stack.split('\n').filter((line) => /^\s+at /.test(line)).join('\n') : error.stack
  }
  if (depth < MAX_DEPTH && isErrorLike(error.cause)) out.cause = describe(error.cause, chainFromDatabase, false, depth + 1)
  if (depth < MAX_DEPTH && Array.isArray(error.errors)) out.errors = error.errors.filter(isErrorLike).slice(0, 4).map((e) => describe(e, chainFromDatabase, false, depth + 1))
  return out
}

/**
 * An error as a log line may hold it (CONTRACT §7): type, codes, constraint name and stack
 * frames, and the messages that cannot quote stored data, SQL or parameters (`messageKept`).
 */
export function describeError (error: unknown, withStack = true): SerializedError {
  // A rejection with a plain value: a string is how such code explains itself; anything else, only its type.
  if (!isErrorLike(error)) return { type: error === null ? 'null' : typeof error, message: typeof error === 'string' ? error : '[not an error]' }
  return describe(error, chain(error).some(fromDatabase), withStack, 0)
}

/**
 * The cause of a failed start in words, on one line: the innermost error of the chain that
 * says something, with its code (`PostgresError 28000: role "app" does not exist`).
 */
export function describeFailure (error: unknown): string {
  if (!isErrorLike(error)) return describeError(error).message
  const links = chain(error)
  const fromDb = links.some(fromDatabase)
  const speaking = links.filter((link) => messageKept(link, fromDb))
  const link = speaking.at(-1) ?? links.at(-1)!
  const code = typeof link.code === 'string' || typeof link.code === 'number' ? ` ${link.code}` : ''
  return `${typeOf(link)}${code}: ${messageKept(link, fromDb) ? String(link.message) : WITHHELD}`
}

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

/** Pino JSON in production, readable lines in development: chosen by the profile, never by NODE_ENV. */
export function loggerOptions (config: Config): FastifyServerOptions['logger'] {
  const base = baseLoggerOptions(config)
  // Stdout written 4 KiB at a time or every 250 ms, whichever comes first, instead of one
  // write(2) a line (a write a line was 6-11% of GET /users/me's CPU: BENCHMARKS.md). Written
  // from the main thread (pino's default), not handed to a libuv thread that then competes with
  // it for the core (4-8% of /users/me's CPU).
  if (config.profile === 'production') {
    const stream = flushedOnExit(pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: 250 }))
    return { ...base, timestamp: () => `,"time":"${new Date().toISOString()}"`, stream }
  }
  return { ...base, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}

/**
 * The one log line of each request (Fastify's own two lines are turned off with
 * `disableRequestLogging`). The route is the pattern, so ids and e-mails in paths stay out of
 * the log; an unmatched request shows its path without the query string. Its fields are fixed
 * and none can hold a secret, so it is written by a child of the app's logger without the
 * redaction every other line goes through: pino runs each field of a line through the redactor
 * of the wildcard paths (`*.password`), about 40% of the line's CPU (BENCHMARKS.md).
 */
export function requestLogHook (log: FastifyBaseLogger) {
  const lines = log.child({}, { redact: [] })
  return function logRequest (request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    lines.info({
      reqId: request.id,
      method: request.method,
      route: request.routeOptions.url ?? request.url.split('?')[0].slice(0, 256),
      statusCode: reply.statusCode,
      responseTime: Math.round(reply.elapsedTime * 100) / 100
    }, 'request completed')
    done()
  }
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
