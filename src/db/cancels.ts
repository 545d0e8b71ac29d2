import { once } from 'node:events'
import type { Socket } from 'node:net'

/**
 * What a CancelRequest names: the backend's process id and secret, as BackendKeyData gave them.
 * A query's (src/db/postgres-internals.ts) is its connection's, rewritten when that reopens.
 */
export interface BackendKey {
  readonly pid: number
  readonly secret: number
}

const BACKEND_KEY_DATA = 0x4b
const READY_FOR_QUERY = 0x5a
const ERROR_RESPONSE = 0x45
const CANCEL_REQUEST_CODE = 80877102

const keyName = ({ pid, secret }: BackendKey) => `${pid}/${secret}`

/**
 * Calls `onKey` with the backend key the server sends while a connection starts, read off the
 * socket that carries the protocol, then stops reading; nothing if the server sends none.
 */
function readBackendKey (socket: Socket, onKey: (key: BackendKey) => void): void {
  let pending: Buffer = Buffer.alloc(0)
  const stop = () => socket.removeListener('data', onData)
  // Called inside the socket's 'data' emit, where a throw would end the process: a message
  // that is not the protocol's stops the reading, and postgres.js, reading the same bytes, fails.
  function onData (chunk: Buffer) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let at = 0
    while (pending.length - at >= 5) {
      const type = pending[at]
      const length = pending.readUInt32BE(at + 1)
      if (type === READY_FOR_QUERY || type === ERROR_RESPONSE || length < 4 || (type === BACKEND_KEY_DATA && length !== 12)) return stop()
      const end = at + 1 + length
      if (pending.length < end) break
      if (type === BACKEND_KEY_DATA) {
        stop()
        return onKey({ pid: pending.readUInt32BE(at + 5), secret: pending.readUInt32BE(at + 9) })
      }
      at = end
    }
    pending = pending.subarray(at)
  }
  socket.on('data', onData)
}

/**
 * CancelRequests sent to the host a statement's connection is on. postgres.js opens a cancel's
 * socket through the connection factory, which would take the next host in turn (a standby that
 * ignores it, its backend left waiting) and would count the socket, closed at once by the
 * server, as a host that failed. So the connector tells us each connection's host and key, and
 * a cancel goes out here: `connectHost` (TCP and TLS as for a connection), the request, the
 * server's close.
 */
export function createCancels (connectHost: (hostIndex: number) => Promise<Socket>, timeoutMs: number) {
  const hostOfKey = new Map<string, number>()

  /** Remembers the host of the connection on `socket`, once its server has named its key, until it closes. */
  function watch (socket: Socket, hostIndex: number): void {
    readBackendKey(socket, (key) => {
      hostOfKey.set(keyName(key), hostIndex)
      socket.once('close', () => hostOfKey.delete(keyName(key)))
    })
  }

  /**
   * Asks the server to cancel what the backend `key` names is running. Resolves false when no
   * connection of ours has that key (it closed: nothing runs there for us); rejects when the
   * host could not be reached, or did not close within the timeout.
   */
  async function cancel (key: BackendKey): Promise<boolean> {
    const hostIndex = hostOfKey.get(keyName(key))
    if (hostIndex === undefined) return false
    // Read now: a query's key is its connection's, which postgres.js rewrites in place when that
    // connection opens anew, as it may while we connect; a later read could cancel another statement.
    const request = Buffer.alloc(16)
    request.writeUInt32BE(16, 0)
    request.writeUInt32BE(CANCEL_REQUEST_CODE, 4)
    request.writeUInt32BE(key.pid, 8)
    request.writeUInt32BE(key.secret, 12)
    const socket = await connectHost(hostIndex)
    const timer = setTimeout(() => socket.destroy(new Error(`no close after a cancel request within ${timeoutMs} ms`)), timeoutMs)
    // A cancel does not hold the process open at shutdown.
    timer.unref()
    try {
      const closed = once(socket, 'close')
      // Written, not ended: the server closes once it has read it. PgBouncer 1.18 took our end
      // of a cancel's socket for a "bouncer config error" and stopped serving every client.
      socket.write(request)
      await closed
      return true
    } finally {
      clearTimeout(timer)
      socket.destroy()
    }
  }

  return { watch, cancel }
}
