import type { Socket } from 'node:net'

interface Watched {
  readonly socket: Socket
  /** The server, as the log names it: host:port. */
  readonly server: string
  /** When the client last wrote with no answer since; null while nothing is awaited. */
  awaitingSince: number | null
  lastRead: number
}

/** Why a socket that awaited an answer past the deadline was destroyed: its queries fail with it (503). */
export class NoAnswerError extends Error {
  readonly code = 'UMS_DB_NO_ANSWER'
  constructor (server: string, ms: number) {
    super(`no answer from ${server} within ${ms} ms: connection destroyed`)
    this.name = 'NoAnswerError'
  }
}

export interface AnswerWatchOptions {
  /** Longest wait for an answer to something written before the socket is destroyed; Infinity: never. */
  readonly answerDeadlineMs: number
  readonly now?: () => number
}

/**
 * The answer deadline of the database sockets. PostgreSQL answers everything it is sent, and
 * statement_timeout makes it answer within 5 s, so a socket that has awaited an answer past the
 * deadline sits on a dead network path (a partition, a fail-over: half-open). Destroying it
 * makes postgres.js fail its query with a NoAnswerError (503) and open a new connection for
 * the next one, where returning it to the pool would hang every later query. Idle sockets that
 * have heard nothing since the dead one started waiting are on the same dead path: they go too.
 * A socket is watched through its own `write` and `data`: the one carrying the plain protocol,
 * which over TLS is the TLS socket (src/db/connector.ts hands that one to postgres.js).
 */
export function createAnswerWatch ({ answerDeadlineMs, now = Date.now }: AnswerWatchOptions) {
  const sockets = new Map<Socket, Watched>()
  let lastAnswered: Socket | undefined

  function watch (socket: Socket, server: string): Socket {
    const state: Watched = { socket, server, awaitingSince: null, lastRead: now() }
    sockets.set(socket, state)
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
    socket.write = ((...args: unknown[]) => {
      state.awaitingSince ??= now()
      return write(...args)
    }) as typeof socket.write
    socket.on('data', () => {
      state.awaitingSince = null
      state.lastRead = now()
      lastAnswered = socket
    })
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
    for (const state of sockets.values()) {
      if (state.awaitingSince !== null && at - state.awaitingSince >= answerDeadlineMs) {
        // Its query fails with the reason, which the log then gives.
        state.socket.destroy(new NoAnswerError(state.server, answerDeadlineMs))
        destroyed++
      }
    }
    return destroyed + closeIdleSince(since)
  }

  /** Destroys the idle sockets (nothing awaited) that have heard nothing since `before`; returns how many. */
  function closeIdleSince (before: number): number {
    let closed = 0
    for (const state of sockets.values()) {
      if (state.awaitingSince === null && state.lastRead < before) {
        state.socket.destroy()
        closed++
      }
    }
    return closed
  }

  const timer = Number.isFinite(answerDeadlineMs) ? setInterval(sweep, Math.min(250, answerDeadlineMs / 4)) : undefined
  timer?.unref()

  return {
    watch,
    sweep,
    /** The socket that received data last: from a query's settlement, the one that answered it. */
    lastAnswered: (): Socket | undefined => lastAnswered,
    /** Every socket, at once: for a probe that gave up. */
    destroyAll: () => { for (const socket of sockets.keys()) socket.destroy() },
    stop: () => clearInterval(timer)
  }
}
