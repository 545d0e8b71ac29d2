import { connect, isIP, Socket } from 'node:net'
import { connect as connectTls } from 'node:tls'
import { setTimeout as sleep } from 'node:timers/promises'
import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import { tlsSettings, TlsRefusedError } from './tls.js'
import { closeAtOnce } from './postgres-internals.js'

// PostgreSQL's SSLRequest: length 8, code 80877103. The server answers one byte, S or N.
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])
/** A host that failed or refused writes is tried after the others for this long. */
const AVOID_MS = 5000
/**
 * A connection closed this soon after it opened was refused by its server or by postgres.js
 * (a standby where a primary is wanted): its host waits a little, so that a pool looking for a
 * primary during a fail-over retries a few times a second instead of spinning.
 */
const SHORT_LIVED_MS = 1000
const PAUSE_MS = 250

export interface ConnectorOptions {
  /** Longest TCP connect plus TLS handshake to one host. */
  readonly connectTimeoutMs: number
  /** Longest wait for an answer to something written before the socket is destroyed; Infinity: never. */
  readonly answerDeadlineMs: number
  readonly now?: () => number
}

interface Watched {
  readonly socket: Socket
  readonly hostIndex: number
  /** When the client last wrote with no answer since; null while nothing is awaited. */
  awaitingSince: number | null
  lastRead: number
}

/** A TCP connect (or a socket folder's connect) that did not complete in time. */
export class ConnectTimeoutError extends Error {
  readonly code = 'CONNECT_TIMEOUT'
}

/**
 * The database sockets, opened by us through postgres.js's documented `socket` factory, which
 * replaces its own connect entirely (src/db/postgres-internals.ts names what we rely on):
 * - the host: each connection attempt takes the next host of the URL, hosts that just failed
 *   last, so postgres.js's `target_session_attrs` check, which closes a standby and asks again,
 *   walks the list until it finds the primary, after a fail-over too;
 * - TLS: negotiated here with libpq's `sslmode` (postgres.js is told none), so the socket
 *   postgres.js writes to is the one carrying the plain protocol, whatever the transport;
 * - the answer deadline: PostgreSQL answers everything it is sent, within statement_timeout, so
 *   a socket awaiting an answer past the deadline sits on a dead path (half-open, black hole).
 *   It is destroyed, with the idle ones silent since: postgres.js fails its query with
 *   CONNECTION_CLOSED (503) and opens a new connection for the next.
 */
export function createConnector (target: DatabaseTarget, { connectTimeoutMs, answerDeadlineMs, now = Date.now }: ConnectorOptions) {
  const tls = tlsSettings(target)
  const sockets = new Map<Socket, Watched>()
  const avoidUntil = target.hosts.map(() => 0)
  let cursor = 0
  let lastAnswered: Watched | undefined

  /** One host: TCP, then the SSLRequest and the handshake that `sslmode` asks for. */
  function connectHost (index: number): Promise<Socket> {
    const { host, port } = target.hosts[index]
    return new Promise((resolve, reject) => {
      const raw = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host)
      const fail = (error: Error) => { clearTimeout(timer); raw.destroy(); reject(error) }
      const timer = setTimeout(() => fail(new ConnectTimeoutError(`no connection to ${describeHost(target.hosts[index])} within ${connectTimeoutMs} ms`)), connectTimeoutMs)
      const done = (socket: Socket) => {
        clearTimeout(timer)
        raw.removeListener('error', fail)
        resolve(socket)
      }
      raw.once('error', fail)
      raw.once('connect', () => {
        if (!tls) return done(raw)
        raw.write(SSL_REQUEST)
        raw.once('data', (answer) => {
          if (answer[0] === 0x53) {
            const secure = connectTls({ ...tls.options, socket: raw, host, servername: isIP(host) ? undefined : host })
            secure.once('error', fail)
            secure.once('secureConnect', () => { secure.removeListener('error', fail); done(secure) })
          } else if (answer[0] === 0x4e && !tls.required) {
            done(raw)
          } else {
            fail(new TlsRefusedError(`${describeHost(target.hosts[index])} does not accept TLS, which sslmode=${target.sslMode} requires`))
          }
        })
      })
    })
  }

  /** Every host once, from the next in turn; those that just failed last. */
  function attemptOrder (): number[] {
    const at = now()
    const turn = target.hosts.map((_host, i) => (cursor + i) % target.hosts.length)
    cursor = (cursor + 1) % target.hosts.length
    return [...turn.filter((i) => avoidUntil[i] <= at), ...turn.filter((i) => avoidUntil[i] > at)]
  }

  function watch (socket: Socket, hostIndex: number): Socket {
    const opened = now()
    const state: Watched = { socket, hostIndex, awaitingSince: null, lastRead: opened }
    sockets.set(socket, state)
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
    socket.write = ((...args: unknown[]) => {
      state.awaitingSince ??= now()
      return write(...args)
    }) as typeof socket.write
    socket.on('data', () => {
      state.awaitingSince = null
      state.lastRead = now()
      lastAnswered = state
    })
    socket.once('close', () => {
      sockets.delete(socket)
      if (now() - opened < SHORT_LIVED_MS) avoidUntil[hostIndex] = Math.max(avoidUntil[hostIndex], now() + PAUSE_MS)
    })
    // postgres.js listens for errors once it has the socket; until then one must not crash the process.
    socket.on('error', () => {})
    return socket
  }

  /**
   * postgres.js's factory: resolves with a connected socket, or with one that fails with the
   * last host's error, which postgres.js hands to the waiting query (a rejected
   * factory would leave that query waiting for good).
   */
  async function open (): Promise<Socket> {
    let lastError: Error = new Error('no host to connect to')
    // Every host just failed or was just refused: wait for the first to be tried again (bounded).
    const wait = Math.min(...avoidUntil) - now()
    if (wait > 0) await sleep(Math.min(wait, PAUSE_MS))
    for (const index of attemptOrder()) {
      try {
        return watch(await connectHost(index), index)
      } catch (error) {
        lastError = error as Error
        avoidUntil[index] = now() + AVOID_MS
      }
    }
    // It fails at postgres.js's first write (the startup message): failing sooner would strand
    // that message in postgres.js's write buffer, to be sent again before the next one.
    const failed = new Socket()
    failed.write = (() => {
      process.nextTick(() => failed.destroy(lastError))
      return true
    }) as typeof failed.write
    return failed
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
      const stuck = state.awaitingSince !== null && at - state.awaitingSince >= answerDeadlineMs
      const silentIdle = state.awaitingSince === null && state.lastRead < since
      if (stuck || silentIdle) {
        state.socket.destroy()
        destroyed++
      }
    }
    return destroyed
  }

  const timer = Number.isFinite(answerDeadlineMs) ? setInterval(sweep, Math.min(250, answerDeadlineMs / 4)) : undefined
  timer?.unref()

  return {
    open,
    sweep,
    /**
     * Closes the connection whose server answered last, and tries its host after the others
     * for a while. Called from a query's rejection, which postgres.js settles while handling
     * that very answer: its reactions run before any other socket's data is handled.
     */
    dropLastAnswered: () => {
      if (!lastAnswered) return
      avoidUntil[lastAnswered.hostIndex] = now() + AVOID_MS
      sockets.delete(lastAnswered.socket)
      closeAtOnce(lastAnswered.socket)
    },
    /** Every socket, at once: for a probe that gave up. */
    destroyAll: () => { for (const socket of sockets.keys()) socket.destroy() },
    stop: () => clearInterval(timer)
  }
}

export type Connector = ReturnType<typeof createConnector>
