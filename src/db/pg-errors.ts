/** PostgreSQL error fields, wherever the driver put them (Drizzle wraps them in `cause`). */
interface PgErrorFields { code?: unknown, message?: unknown, constraint_name?: unknown, constraint?: unknown, cause?: unknown }

/** How many links of an error's cause chain are read, here and in the log (a chain may loop). */
export const MAX_CAUSE_DEPTH = 5

/** The error and its causes, outermost first. */
function * causes (error: unknown): Generator<PgErrorFields> {
  let current = error as PgErrorFields | undefined
  for (let depth = 0; current && depth < MAX_CAUSE_DEPTH; depth++) {
    yield current
    current = current.cause as PgErrorFields | undefined
  }
}

// Five characters with at least one digit: a SQLSTATE (08006, 57P01), never a Node code such as EPIPE.
export const isSqlState = (code: unknown): code is string => typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && /[0-9]/.test(code)

/**
 * SQLSTATE classes whose messages quote no data (CONTRACT §7): connection, transaction state,
 * authorization, catalog, rollback, resources, limits, object state, operator intervention,
 * system and internal errors. Others (22 data, 23 constraints, 42 syntax…) may quote values.
 */
const PLAIN_CLASSES = new Set(['08', '25', '28', '3D', '3F', '40', '53', '54', '55', '57', '58', 'XX'])
/**
 * Of the others, insufficient_privilege: its texts name an object or a privilege (`permission
 * denied for schema drizzle`, `must be owner of table users`), which is what a role's operator
 * needs to grant; a value never.
 */
const PLAIN_CODES = new Set(['42501'])
export const speaksPlainly = (sqlState: string): boolean => PLAIN_CLASSES.has(sqlState.slice(0, 2)) || PLAIN_CODES.has(sqlState)

function pgFields (error: unknown): PgErrorFields | undefined {
  for (const fields of causes(error)) if (isSqlState(fields.code)) return fields
  return undefined
}

/** The SQLSTATE of a PostgreSQL error, wherever the driver put it; undefined for any other error. */
export function sqlStateOf (error: unknown): string | undefined {
  return pgFields(error)?.code as string | undefined
}

/** The name of the unique constraint a 23505 error broke, or undefined for any other error. */
export function uniqueViolation (error: unknown): string | undefined {
  const fields = pgFields(error)
  if (fields?.code !== '23505') return undefined
  return String(fields.constraint_name ?? fields.constraint ?? '')
}

const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'UMS_DB_ACQUIRE_TIMEOUT', 'UMS_DB_TIMEOUT', 'UMS_DB_TLS_REFUSED', 'UMS_DB_NO_ANSWER', 'UMS_DB_NOT_POSTGRES', 'UMS_DB_STARTUP_REFUSED', 'UMS_DB_CLOSED_EARLY', 'UMS_DB_NO_STARTUP_ANSWER'])
/** OpenSSL's verification failures as Node names them (the certificate, its chain, its dates). */
const TLS_VERIFY_CODES = /^(ERR_TLS_|UNABLE_TO_|(SELF_SIGNED|DEPTH_ZERO_SELF_SIGNED|CERT)_)/

/**
 * True when the database, not the request, is at fault: it cannot be reached (network, TLS,
 * login), is shutting down, is not migrated yet, or a statement ran past statement_timeout.
 * Such requests answer 503.
 */
export function databaseUnavailable (error: unknown): boolean {
  // The outermost link that names what happened decides: Drizzle's wrapper names nothing, the
  // driver's error below it does; a statement we cancelled past statement_timeout
  // (UMS_DB_TIMEOUT) stays the database's fault whatever the server then answered, its cause.
  for (const fields of causes(error)) {
    const { code } = fields
    // A server that ends the session (FATAL) refused the instance, whatever its code: a database
    // closed to connections (55000), CONNECT revoked (42501).
    if (isSqlState(code)) return unavailableSqlState(code) || severityOf(fields) === 'FATAL'
    // The network, our own bounds, and TLS to a server whose certificate no longer verifies.
    if (typeof code === 'string' && (UNAVAILABLE_NODE_CODES.has(code) || TLS_VERIFY_CODES.test(code))) return true
  }
  return false
}

// 08: connection exception; 25006: read-only transaction (a standby, a demoted primary); 57P0x:
// admin/crash shutdown, cannot connect now; 57014: canceled (timeout); 53: insufficient resources;
// a schema behind the code (behindMigrations); 28: the role may not log in; 3D000: the database is gone.
const unavailableSqlState = (sqlState: string): boolean =>
  sqlState.startsWith('08') || sqlState === '25006' || sqlState.startsWith('57P') || sqlState === '57014' || sqlState.startsWith('53') ||
  behindCode(sqlState) || sqlState.startsWith('28') || sqlState === '3D000'

// 42P01, 42703: no such table or column.
const behindCode = (sqlState: string | undefined): boolean => sqlState === '42P01' || sqlState === '42703'

/** The database's schema is behind this release's (MIGRATIONS=off before `migrate`): no such table or column. */
export const behindMigrations = (error: unknown): boolean => behindCode(sqlStateOf(error))

const severityOf = (error: unknown): unknown => (error as { severity?: unknown } | undefined)?.severity
/** An error the server sent (an ErrorResponse, ERROR or FATAL), not the client's nor the network's. */
export const sentByServer = (error: unknown): boolean => typeof severityOf(error) === 'string'
/** A server's refusal within the session (severity ERROR): the connection stays usable after a rollback. */
export const refusedInSession = (error: unknown): boolean => severityOf(error) === 'ERROR'

/**
 * The server will not take writes on this connection: read-only (25006), or shutting down for
 * a fail-over (57P01-57P03). The connection is not reused: the next one may find the new primary.
 */
export function refusesWrites (error: unknown): boolean {
  const sqlState = pgFields(error)?.code
  return sqlState === '25006' || (typeof sqlState === 'string' && sqlState.startsWith('57P'))
}

/** A transaction pooler (PgBouncer's stock settings) refused a parameter of the startup packet. */
export function refusedStartupParameter (error: unknown): boolean {
  const fields = pgFields(error)
  return fields?.code === '08P01' && /unsupported startup parameter/i.test(String(fields.message))
}

/**
 * A server that took the TCP connection and then hung up, or stayed silent, before the
 * connection was ready; its code keeps the message (the host) in the log where it is the cause
 * of a database error (src/telemetry/error-description.ts).
 */
export class NotReadyError extends Error {
  readonly code: 'UMS_DB_CLOSED_EARLY' | 'UMS_DB_NO_STARTUP_ANSWER'
  constructor (server: string, hungUp: boolean) {
    super(hungUp ? `${server} closed the connection before it was ready` : `no answer from ${server} to the startup message`)
    this.name = 'NotReadyError'
    this.code = hungUp ? 'UMS_DB_CLOSED_EARLY' : 'UMS_DB_NO_STARTUP_ANSWER'
  }
}

/** No pooled connection became free, or could be opened, within the acquire timeout. */
export class AcquireTimeoutError extends Error {
  readonly code = 'UMS_DB_ACQUIRE_TIMEOUT'
  /** `cause`: why no connection could be opened meanwhile, when a host said so (the log shows it). */
  constructor (ms: number, cause?: Error) {
    super(`no database connection within ${ms} ms`, cause === undefined ? undefined : { cause })
    this.name = 'AcquireTimeoutError'
  }
}

/** A query that did not answer in time: a health check past its own bound, a statement cancelled past statement_timeout. */
export class DatabaseTimeoutError extends Error {
  readonly code = 'UMS_DB_TIMEOUT'
  constructor (ms: number, options?: ErrorOptions) {
    super(`database did not answer within ${ms} ms`, options)
    this.name = 'DatabaseTimeoutError'
  }
}

/**
 * A statement cancelled past statement_timeout (src/db/postgres.ts), failed whatever the server
 * then answered: `cause` is that answer when it was a refusal.
 */
export class StatementCancelledError extends DatabaseTimeoutError {
  constructor (ms: number, answer?: unknown) {
    super(ms, answer === undefined ? undefined : { cause: answer })
    this.name = 'StatementCancelledError'
  }
}
