import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config/index.js'
import pino from 'pino'
import { describeError, type SerializedError } from './error-description.js'

/**
 * Secrets that must never reach a log line, wherever they appear. Nothing logs bodies or
 * headers on purpose; these catch an error object or a debugging line that would.
 */
const REDACTED_PATHS = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie',
  'password', '*.password', 'body.password', 'req.body.password',
  'token', '*.token', 'body.token', 'passwordHash', '*.passwordHash'
]

type Destination = ReturnType<typeof pino.destination>
const buffered = new Set<Destination>()
/** Lines held for a log that cannot be written, at most: past it they are dropped. */
const MAX_UNWRITTEN_BYTES = 16 * 1024 * 1024

/**
 * Pino flushes only its asynchronous destinations when the process exits: the lines a
 * synchronous one still buffers (under 4 KiB) are written here, so a crash or shutdown that
 * ends in process.exit loses none. Not where the last write failed: sonic-boom's flushSync
 * retries a write that fails for good (ENOSPC) without end.
 */
function flushedOnExit (stream: Destination): Destination {
  if (buffered.size === 0) {
    process.once('exit', () => {
      for (const pending of buffered) {
        if (unwritable.has(pending)) continue
        try { pending.flushSync() } catch { /* stdout is gone: nowhere left to write */ }
      }
    })
  }
  buffered.add(stream)
  return stream
}

const unwritable = new WeakSet<Destination>()

/**
 * A log that cannot be written (a full disk) costs its lines, not the service: the stream's
 * 'error' had no listener and ended the process, and every instance on that disk with it.
 * Said on stderr at most once a minute; the lines wait, up to MAX_UNWRITTEN_BYTES, and go out
 * with the next write that succeeds.
 */
function survivingWriteErrors (stream: Destination): Destination {
  let saidAt = -Infinity
  stream.on('write', () => unwritable.delete(stream))
  stream.on('error', (error: NodeJS.ErrnoException) => {
    unwritable.add(stream)
    if (Date.now() - saidAt < 60_000) return
    saidAt = Date.now()
    try { process.stderr.write(`log lines lost: stdout refused them (${error.code ?? error.message}); the service goes on\n`) } catch { /* nowhere to say it */ }
  })
  return stream
}

/** Pino options shared by every profile: level, redaction and the error serializer. */
export function baseLoggerOptions (config: Pick<Config, 'logLevel'>) {
  return {
    level: config.logLevel,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    // Replaces pino's, which copies every field of an error, message and SQL parameters included.
    serializers: { err: (error: unknown) => describeError(error) as SerializedError & { stack: string } },
    // pino writes a line's message from its error's own text when none is given, past the
    // serializer above (Fastify's warning that a reply was sent quotes the URL): the described one.
    hooks: { logMethod: withDescribedMessage }
  }
}

function withDescribedMessage (this: pino.Logger, args: Parameters<pino.LogFn>, method: pino.LogFn): void {
  const [first] = args as unknown[]
  if (args.length === 1 && typeof first === 'object' && first !== null) {
    const error = first instanceof Error ? first : (first as { err?: unknown }).err
    if (error !== undefined) return method.call(this, first instanceof Error ? { err: first } : first, describeError(error, false).message)
  }
  method.apply(this, args)
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

/** Pino JSON in production, readable lines in development: chosen by the profile, not by NODE_ENV. */
export function loggerOptions (config: Config): pino.LoggerOptions {
  const base = baseLoggerOptions(config)
  if (config.profile === 'production') return { ...base, timestamp: isoTimestamp() }
  return { ...base, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
}

/**
 * Production's stdout, opened anew at each call: written 4 KiB at a time or every 250 ms,
 * whichever comes first, so that a request does not cost a write(2) of its own; from the main
 * thread (pino's default), not handed to a libuv thread that would compete with it for the core.
 */
export function stdoutDestination (): Destination {
  return flushedOnExit(survivingWriteErrors(pino.destination({ dest: 1, sync: true, minLength: 4096, maxLength: MAX_UNWRITTEN_BYTES, periodicFlush: 250 })))
}

/** The CLI's: JSON lines as production's, on stdout and written at once (the command prints between them). */
export function createCommandLogger (config: Pick<Config, 'logLevel'>): pino.Logger {
  return pino({ ...baseLoggerOptions(config), timestamp: isoTimestamp() }, pino.destination({ dest: 1, sync: true }))
}

/** The service's logger, made before the app so that the start logs through it too (server.ts). */
export function createLogger (config: Config): FastifyBaseLogger {
  const options = loggerOptions(config)
  return config.profile === 'production' ? pino(options, stdoutDestination()) : pino(options)
}
