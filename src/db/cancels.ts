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

const CANCEL_REQUEST_CODE = 80877102

const keyName = ({ pid, secret }: BackendKey) => `${pid}/${secret}`

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

  /** Remembers the host of the connection on `socket`, whose server named `key` (src/db/startup-answer.ts), until it closes. */
  function remember (socket: Socket, hostIndex: number, key: BackendKey): void {
    const name = keyName(key)
    hostOfKey.set(name, hostIndex)
    socket.once('close', () => hostOfKey.delete(name))
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
      // Written, not ended: the server closes once it has read it. PgBouncer 1.18 takes an ended
      // cancel socket for a "bouncer config error" and stops serving every client.
      socket.write(request)
      await closed
      return true
    } finally {
      clearTimeout(timer)
      socket.destroy()
    }
  }

  return { remember, cancel }
}
