import type { Socket } from 'node:net'
import type { BackendKey } from './cancels.js'

/** What a server may send before a connection is ready: authentication, notices, parameters, its key, a version it offers. */
const STARTUP_TYPES = new Set(['R', 'E', 'N', 'S', 'K', 'Z', 'v'].map((c) => c.charCodeAt(0)))
const [BACKEND_KEY_DATA, READY_FOR_QUERY, ERROR_RESPONSE] = ['K', 'Z', 'E'].map((c) => c.charCodeAt(0))
/** Far above any startup message (SASL's run to a few hundred bytes), far below what another protocol's text reads as. */
const MAX_STARTUP_MESSAGE = 1 << 20

/** A peer that answered the startup message with something other than PostgreSQL's protocol. */
export class NotPostgresError extends Error {
  readonly code = 'UMS_DB_NOT_POSTGRES'
  constructor (server: string) {
    super(`${server} answered in a protocol other than PostgreSQL's: is it a PostgreSQL server or pooler, on the right port?`)
    this.name = 'NotPostgresError'
  }
}

/**
 * A server's refusal of a new connection: an ErrorResponse (its SQLSTATE as `code`), or the
 * text-only error a postmaster that cannot start a backend sends (libpq's "pre-3.0" error).
 */
export interface StartupRefusal {
  readonly code?: string
  readonly message: string
  /** The text-only form, which postgres.js cannot read: the connection must be failed for it. */
  readonly legacy: boolean
}

/**
 * Why the server refused a connection, at its start or, a pooler that logged it in from its
 * cache, at its first query (`atFirstQuery`); kept as the host's last failure (src/db/connector.ts).
 */
export class StartupRefusedError extends Error {
  readonly code: string
  constructor (server: string, { code, message }: StartupRefusal, atFirstQuery = false) {
    super(`${server} ${atFirstQuery ? 'closed the connection at its first query' : 'refused the connection'}: ${message}`)
    this.name = 'StartupRefusedError'
    this.code = code ?? 'UMS_DB_STARTUP_REFUSED'
  }
}

export interface StartupAnswer {
  /** The backend key, once the server sent it. */
  readonly onKey: (key: BackendKey) => void
  /** The connection is ready for queries. */
  readonly onReady: () => void
  readonly onRefused: (refusal: StartupRefusal) => void
  /** What came is not PostgreSQL's protocol. */
  readonly onForeign: () => void
}

/** An ErrorResponse's fields, each a type byte and a NUL-terminated string. */
function fieldsOf (body: Buffer): Map<string, string> {
  const fields = new Map<string, string>()
  for (let at = 0; at < body.length && body[at] !== 0;) {
    const end = body.indexOf(0, at + 1)
    if (end < 0) break
    fields.set(String.fromCharCode(body[at]), body.toString('utf8', at + 1, end))
    at = end + 1
  }
  return fields
}

/** An ErrorResponse's SQLSTATE and message. */
function errorFields (body: Buffer): StartupRefusal {
  const fields = fieldsOf(body)
  return { code: fields.get('C'), message: fields.get('M') ?? 'no message', legacy: false }
}

/**
 * A FATAL ErrorResponse that `chunk`, the first data after ReadyForQuery, starts with: a pooler
 * that logged the connection in from its cache and cannot serve it (PgBouncer's `server login
 * has been failing`), a server shutting down. postgres.js's first query on a connection is its
 * own (the array types), whose failure it keeps to itself.
 */
export function fatalAnswer (chunk: Buffer): StartupRefusal | undefined {
  const length = chunk.length >= 5 && chunk[0] === ERROR_RESPONSE ? chunk.readUInt32BE(1) : 0
  if (isLegacyLength(length) || chunk.length < 1 + length) return undefined
  const body = chunk.subarray(5, 1 + length)
  const fields = fieldsOf(body)
  const severity = fields.get('V') ?? fields.get('S')
  return severity === 'FATAL' || severity === 'PANIC' ? errorFields(body) : undefined
}

/**
 * The text-only error's message: up to its NUL (libpq reads such an error up to 30,000 bytes), or
 * all of `bytes` when they are `whole`; undefined while more may come.
 */
function legacyError (bytes: Buffer, whole = false): StartupRefusal | undefined {
  const end = bytes.indexOf(0, 1)
  if (end < 0 && bytes.length < 30_000 && !whole) return undefined
  return { message: bytes.toString('utf8', 1, end < 0 ? bytes.length : end).trim(), legacy: true }
}

/** libpq's test for the text-only form: an 'E' whose length no ErrorResponse has. */
const isLegacyLength = (length: number) => length < 8 || length > 30_000

/** An error a server sent whole (`bytes` from its 'E'), in either form: to the SSLRequest (src/db/tls.ts). */
export function refusalIn (bytes: Buffer): StartupRefusal {
  const length = bytes.length >= 5 ? bytes.readUInt32BE(1) : 0
  if (!isLegacyLength(length) && bytes.length >= 1 + length) return errorFields(bytes.subarray(5, 1 + length))
  return legacyError(bytes, true)!
}

/**
 * Reads the server's answer to a connection's startup message off the socket that carries the
 * protocol, beside postgres.js (each 'data' listener gets the same chunks), and stops reading
 * once the connection is ready or refused, or the bytes are not the protocol's.
 * Called inside the socket's 'data' emit, where a throw would end the process: it never throws.
 */
export function readStartupAnswer (socket: Socket, answer: StartupAnswer): void {
  let pending: Buffer = Buffer.alloc(0)
  const stop = () => socket.removeListener('data', onData)
  function onData (chunk: Buffer) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let at = 0
    while (at < pending.length) {
      const type = pending[at]
      if (!STARTUP_TYPES.has(type)) {
        stop()
        return answer.onForeign()
      }
      if (pending.length - at < 5) break
      const length = pending.readUInt32BE(at + 1)
      if (type === ERROR_RESPONSE && isLegacyLength(length)) {
        const refusal = legacyError(pending.subarray(at))
        if (refusal === undefined) break
        stop()
        return answer.onRefused(refusal)
      }
      if (length < 4 || length > MAX_STARTUP_MESSAGE || (type === BACKEND_KEY_DATA && length !== 12)) {
        stop()
        return answer.onForeign()
      }
      const end = at + 1 + length
      if (pending.length < end) break
      if (type === ERROR_RESPONSE) {
        stop()
        return answer.onRefused(errorFields(pending.subarray(at + 5, end)))
      }
      if (type === BACKEND_KEY_DATA) answer.onKey({ pid: pending.readUInt32BE(at + 5), secret: pending.readUInt32BE(at + 9) })
      if (type === READY_FOR_QUERY) {
        stop()
        return answer.onReady()
      }
      at = end
    }
    pending = pending.subarray(at)
  }
  socket.on('data', onData)
}
