import { connect, type Socket } from 'node:net'

/** Connection options as postgres.js hands them to a socket factory. */
interface SocketTarget { host: string[], port: number[], path?: string | false }

interface Watched {
  /** When the client last wrote with no answer since; null while nothing is awaited. */
  awaitingSince: number | null
  lastRead: number
}

export interface SocketWatchOptions {
  /** Longest wait for an answer to something written before the socket is destroyed. */
  readonly answerDeadlineMs: number
  readonly now?: () => number
}

/**
 * The database sockets, opened by us (postgres.js's documented `socket` factory) so that a
 * silent one can be destroyed. PostgreSQL answers everything it is sent, and statement_timeout
 * makes it answer within 5 s, so a socket that has awaited an answer past the deadline sits on
 * a dead network path (a partition, a fail-over: half-open). Destroying it makes postgres.js
 * fail its query with CONNECTION_CLOSED (503) and open a new connection for the next one, where
 * returning it to the pool would hang every later query. Idle sockets that have heard nothing
 * since the dead one started waiting are on the same dead path: they go too.
 */
export function createSocketWatch ({ answerDeadlineMs, now = Date.now }: SocketWatchOptions) {
  const sockets = new Map<Socket, Watched>()

  /**
   * Returned before it connects, as postgres.js expects of a factory: it writes the startup
   * message at once (Node queues it), its connect_timeout bounds the whole start, and a failed
   * connection reaches it as the socket's own error and close.
   */
  function open ({ host, port, path }: SocketTarget): Socket {
    const socket = path ? connect(path) : connect(port[0], host[0])
    const state: Watched = { awaitingSince: null, lastRead: now() }
    sockets.set(socket, state)
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
    socket.write = ((...args: unknown[]) => {
      state.awaitingSince ??= now()
      return write(...args)
    }) as typeof socket.write
    socket.on('data', () => { state.awaitingSince = null; state.lastRead = now() })
    socket.once('close', () => sockets.delete(socket))
    return socket
  }

  /** Destroys the sockets past their deadline, and the idle ones silent since; returns how many. */
  function sweep (): number {
    const at = now()
    let since = Infinity
    for (const state of sockets.values()) {
      if (state.awaitingSince !== null && at - state.awaitingSince >= answerDeadlineMs) since = Math.min(since, state.awaitingSince)
    }
    if (since === Infinity) return 0
    let destroyed = 0
    for (const [socket, state] of sockets) {
      const stuck = state.awaitingSince !== null && at - state.awaitingSince >= answerDeadlineMs
      const silentIdle = state.awaitingSince === null && state.lastRead < since
      if (stuck || silentIdle) {
        socket.destroy()
        destroyed++
      }
    }
    return destroyed
  }

  const timer = setInterval(sweep, Math.min(250, answerDeadlineMs / 4))
  timer.unref()

  return {
    open,
    sweep,
    /** Every socket, at once: for a probe that gave up. */
    destroyAll: () => { for (const socket of sockets.keys()) socket.destroy() },
    stop: () => clearInterval(timer)
  }
}

export type SocketWatch = ReturnType<typeof createSocketWatch>
