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

export interface StartupAnswer {
  /** The backend key, once the server sent it. */
  readonly onKey: (key: BackendKey) => void
  /** The connection is ready for queries. */
  readonly onReady: () => void
  /** What came is not PostgreSQL's protocol. */
  readonly onForeign: () => void
}

/**
 * Reads the server's answer to a connection's startup message off the socket that carries the
 * protocol, beside postgres.js (each 'data' listener gets the same chunks), and stops reading
 * once the connection is ready, refused (ErrorResponse), or the bytes are not the protocol's.
 * Called inside the socket's 'data' emit, where a throw would end the process: it never throws.
 */
export function readStartupAnswer (socket: Socket, answer: StartupAnswer): void {
  let pending: Buffer = Buffer.alloc(0)
  const stop = () => socket.removeListener('data', onData)
  function onData (chunk: Buffer) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let at = 0
    while (pending.length - at >= 1) {
      const type = pending[at]
      const length = pending.length - at >= 5 ? pending.readUInt32BE(at + 1) : undefined
      if (!STARTUP_TYPES.has(type) || (length !== undefined && (length < 4 || length > MAX_STARTUP_MESSAGE || (type === BACKEND_KEY_DATA && length !== 12)))) {
        stop()
        return answer.onForeign()
      }
      if (type === ERROR_RESPONSE) return stop()
      if (length === undefined || pending.length < at + 1 + length) break
      if (type === BACKEND_KEY_DATA) answer.onKey({ pid: pending.readUInt32BE(at + 5), secret: pending.readUInt32BE(at + 9) })
      if (type === READY_FOR_QUERY) {
        stop()
        return answer.onReady()
      }
      at += 1 + length
    }
    pending = pending.subarray(at)
  }
  socket.on('data', onData)
}
