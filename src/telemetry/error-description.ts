import { MAX_CAUSE_DEPTH as MAX_DEPTH, isSqlState, speaksPlainly } from '../db/pg-errors.js'

/** Errors of the database layer: their messages and fields quote SQL, parameters and stored values. */
const DATABASE_ERROR_TYPES = new Set(['DrizzleQueryError', 'DrizzleError', 'TransactionRollbackError', 'PostgresError', 'DatabaseError'])
const DRIZZLE_WRAPPERS = new Set(['DrizzleQueryError', 'DrizzleError', 'TransactionRollbackError'])
// DrizzleQueryError: query, params; postgres.js: query, parameters (non-enumerable); PostgreSQL: detail, severity.
const DATABASE_ERROR_FIELDS = ['query', 'params', 'parameters', 'detail', 'severity']
/** What an error may say about itself in a log line: codes and names, never a value. */
const SAFE_FIELDS = ['code', 'errno', 'syscall', 'address', 'port', 'hostname', 'statusCode', 'reason'] as const

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

/** The error and its causes, outermost first. */
function chain (error: ErrorLike): ErrorLike[] {
  const links = [error]
  while (links.length < MAX_DEPTH && isErrorLike(links.at(-1)!.cause)) links.push(links.at(-1)!.cause as ErrorLike)
  return links
}

/** Pino's shape of a serialized error, which Fastify's types demand of an `err` serializer. */
export interface SerializedError { type: string, message: string, stack?: string, [field: string]: unknown }

const WITHHELD = '[withheld: database error]'
/** Fastify's errors that quote the request's URL or a part of it, query string included. */
const QUOTING_THE_REQUEST = new Set(['FST_ERR_REP_ALREADY_SENT', 'FST_ERR_BAD_URL', 'FST_ERR_MAX_PARAM_LENGTH'])
const WITHHELD_REQUEST = '[withheld: quotes the request]'

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
  if (code !== undefined && QUOTING_THE_REQUEST.has(code)) return false
  if (DRIZZLE_WRAPPERS.has(typeOf(error))) return false
  if (code !== undefined && /^[A-Z][A-Z0-9_]+$/.test(code)) return true
  return !chainFromDatabase
}

const withheld = (error: ErrorLike) => QUOTING_THE_REQUEST.has(String(error.code)) ? WITHHELD_REQUEST : WITHHELD

function describe (error: ErrorLike, chainFromDatabase: boolean, withStack: boolean, depth: number): SerializedError {
  const kept = messageKept(error, chainFromDatabase)
  const out: SerializedError = { type: typeOf(error), message: kept ? String(error.message) : withheld(error) }
  for (const field of SAFE_FIELDS) {
    const value = error[field]
    if (typeof value === 'string' || typeof value === 'number') out[field] = value
  }
  const constraint = error.constraint_name ?? error.constraint
  if (typeof constraint === 'string') out.constraint = constraint
  // A stack starts with the message (Drizzle's also appends its cause's): only the frames are safe.
  if (withStack && typeof error.stack === 'string') {
    out.stack = chainFromDatabase || !kept ? error.stack.split('\n').filter((line) => /^\s+at /.test(line)).join('\n') : error.stack
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
  return `${typeOf(link)}${code}: ${messageKept(link, fromDb) ? String(link.message) : withheld(link)}`
}
