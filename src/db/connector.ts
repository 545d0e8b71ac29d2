import { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import { connectTo } from './connect-to.js'
import { tlsSettings } from './tls.js'
import { closeAtOnce, failStarting, nameForErrors } from './postgres-internals.js'
import { createAnswerWatch } from './answer-watch.js'
import { createCancels } from './cancels.js'
import { NotPostgresError, StartupRefusedError, readStartupAnswer } from './startup-answer.js'

/**
 * A host that failed or closed a new connection at once is tried after the others for this
 * long, and so is, behind the free ones but ahead of those, a host that refused a write.
 */
const AVOID_MS = 5000
/**
 * A connection closed this soon after it opened was refused by its server or by postgres.js
 * (a standby where a primary is wanted): its host is avoided as one that failed, so a primary
 * that refused a write (read-only for a while) is still tried before a standby refused since.
 */
const SHORT_LIVED_MS = 1000
/** Longest wait before trying again when every host is avoided: a few tries a second, not a spin. */
const PAUSE_MS = 250

export interface ConnectorOptions {
  /** Longest TCP connect plus TLS handshake to one host. */
  readonly connectTimeoutMs: number
  /** Longest wait for an answer to something written before the socket is destroyed; Infinity: never. */
  readonly answerDeadlineMs: number
  readonly now?: () => number
}

/** No host of the URL took a connection while a client started: the hosts, and the last failure. */
export class StartTimeoutError extends Error {
  readonly code = 'UMS_DB_NO_HOST'
  constructor (message: string) {
    super(message)
    this.name = 'StartTimeoutError'
  }
}

/**
 * The database sockets, opened by us through postgres.js's documented `socket` factory, which
 * replaces its own connect entirely (src/db/postgres-internals.ts names what we rely on):
 * - the host: each connection attempt takes the next host of the URL, hosts that just failed
 *   last, so postgres.js's `target_session_attrs` check, which closes a standby and asks again,
 *   walks the list until it finds the primary, after a fail-over too (with `any`, the first
 *   host that answers, in the URL's order);
 * - TLS: negotiated here with libpq's `sslmode` (postgres.js is told none), so the socket
 *   postgres.js writes to is the one carrying the plain protocol, whatever the transport;
 * - the answer deadline (src/db/answer-watch.ts), on the socket that carries the protocol;
 * - cancels, each to the host of its statement's connection (src/db/cancels.ts).
 */
export function createConnector (target: DatabaseTarget, { connectTimeoutMs, answerDeadlineMs, now = Date.now }: ConnectorOptions) {
  const tls = tlsSettings(target)
  const answers = createAnswerWatch({ answerDeadlineMs, now })
  const hostOf = new WeakMap<Socket, number>()
  const avoidUntil = target.hosts.map(() => 0)
  const refusedWriteAt = target.hosts.map(() => -Infinity)
  const droppedForWrite = new WeakSet<Socket>()
  let cursor = 0
  let lastFailure: Error | undefined
  let lastFailureAt = -Infinity
  /** Connections that reached ReadyForQuery: a single host's start is bounded only until one does. */
  let readyConnections = 0
  /** Told when every host failed in one round of `open`. */
  const roundWatchers = new Set<(error: Error) => void>()
  const connectHost = (index: number) => connectTo(target.hosts[index], target.sslMode, tls, connectTimeoutMs)
  const cancels = createCancels(connectHost, connectTimeoutMs)

  /**
   * Every host once, from the next in turn: the free ones first; then those that just refused a
   * write (a new primary elsewhere is found first, yet a primary read-only for a while still
   * comes before a standby refused since, and keeps serving reads); then the avoided ones, the
   * soonest free first.
   */
  function attemptOrder (): number[] {
    const at = now()
    const turn = target.hosts.map((_host, i) => (cursor + i) % target.hosts.length)
    // `any` takes the first host that answers, in the URL's order, as libpq does: turning would
    // spread connections, and writes, over a standby listed second.
    if (target.targetSessionAttrs !== 'any') cursor = (cursor + 1) % target.hosts.length
    const rank = (i: number): [number, number] => avoidUntil[i] > at ? [2, avoidUntil[i]] : at - refusedWriteAt[i] < AVOID_MS ? [1, refusedWriteAt[i]] : [0, 0]
    // A stable sort: free hosts keep their turn.
    return turn.sort((a, b) => {
      const [rankA, sinceA] = rank(a)
      const [rankB, sinceB] = rank(b)
      return rankA - rankB || sinceA - sinceB
    })
  }

  /** A host's failure, kept to say why no connection came (`started`, `recentFailure`). */
  function failure (error: Error): Error {
    lastFailure = error
    lastFailureAt = now()
    return error
  }

  /**
   * Watched for answers, and its server's answer to the startup message read: its key, for a
   * cancel; a refusal, kept as the host's last failure (with several hosts postgres.js moves on
   * without a word); an answer postgres.js cannot read (another protocol, a postmaster's
   * text-only error), failed at once, where postgres.js alone would wait on it for good. A
   * connection that closes soon after it opened pauses its host, unless we closed it for a
   * refused write: that host ranks as one (`attemptOrder`), ahead of the failed.
   */
  function watched (socket: Socket, hostIndex: number): Socket {
    const opened = now()
    const server = describeHost(target.hosts[hostIndex])
    let startup: 'answering' | 'ready' | 'refused' = 'answering'
    let serverEnded = false
    hostOf.set(socket, hostIndex)
    nameForErrors(socket, target.hosts[hostIndex])
    readStartupAnswer(socket, {
      onKey: (key) => cancels.remember(socket, hostIndex, key),
      onReady: () => {
        startup = 'ready'
        readyConnections++
      },
      onRefused: (refusal) => {
        startup = 'refused'
        const error = failure(new StartupRefusedError(server, refusal))
        if (refusal.legacy) failStarting(socket, error)
      },
      onForeign: () => {
        startup = 'refused'
        failStarting(socket, failure(new NotPostgresError(server)))
      }
    })
    socket.once('end', () => { serverEnded = true })
    socket.once('close', () => {
      // The server hung up unasked; our own timeouts and closes name themselves.
      if (startup === 'answering' && serverEnded) failure(new Error(`${server} closed the connection before it was ready`))
      if (now() - opened < SHORT_LIVED_MS && !droppedForWrite.has(socket)) avoidUntil[hostIndex] = Math.max(avoidUntil[hostIndex], now() + AVOID_MS)
    })
    // postgres.js listens for errors once it has the socket; until then one must not crash the process.
    socket.on('error', () => {})
    return answers.watch(socket, server)
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
        return watched(await connectHost(index), index)
      } catch (error) {
        lastError = failure(error as Error)
        avoidUntil[index] = now() + AVOID_MS
      }
    }
    for (const watcher of roundWatchers) watcher(lastError)
    // It fails at postgres.js's first write (the startup message), as a refused connection would.
    const failed = new Socket()
    failed.write = (() => {
      process.nextTick(() => failed.destroy(lastError))
      return true
    }) as typeof failed.write
    return failed
  }

  /**
   * A client's first query at start-up, or a StartTimeoutError once every host of several failed
   * in one round, or none took the connection within every host's connect timeout and a second
   * more (at least 5 s): postgres.js retries a first query for good while its connections close
   * before they are ready (each a standby; a proxy whose database is down). A single host's
   * refusal reaches the query at once, in postgres.js's words, and once one of its connections
   * is ready the query is left to the bounds of a query (a slow server still starts).
   */
  async function started<T> (query: PromiseLike<T>): Promise<T> {
    const single = target.hosts.length === 1
    const readyBefore = readyConnections
    const hosts = target.hosts.map(describeHost).join(', ')
    const ms = Math.max(5000, target.hosts.length * connectTimeoutMs + 1000)
    let timer: NodeJS.Timeout | undefined
    let watcher: ((error: Error) => void) | undefined
    const failed = new Promise<never>((_resolve, reject) => {
      watcher = (error) => reject(new StartTimeoutError(`no host of ${hosts} took a connection; the last failure: ${error.message}`))
      if (!single) roundWatchers.add(watcher)
      timer = setTimeout(() => {
        if (single && readyConnections > readyBefore) return
        const last = lastFailure === undefined ? '' : `; the last failure: ${lastFailure.message}`
        reject(new StartTimeoutError(`no host of ${hosts} took a connection within ${ms} ms${last}`))
      }, ms)
    })
    try {
      return await Promise.race([query, failed])
    } finally {
      clearTimeout(timer)
      roundWatchers.delete(watcher!)
    }
  }

  return {
    open,
    started,
    /** The last host's failure to connect, if it came within `ms`: why a query found no connection. */
    recentFailure: (ms: number): Error | undefined => now() - lastFailureAt <= ms ? lastFailure : undefined,
    /**
     * Closes the connection whose server answered last, a server that refused a write, and tries
     * its host after the free ones for a while (`attemptOrder`). Called from a query's rejection,
     * which postgres.js settles while handling that very answer: its reactions run before any
     * other socket's data is handled.
     */
    dropLastAnswered: () => {
      const socket = answers.takeLastAnswered()
      if (!socket) return
      refusedWriteAt[hostOf.get(socket) ?? 0] = now()
      droppedForWrite.add(socket)
      closeAtOnce(socket)
    },
    /** Cancels what a connection of ours runs, on the host that connection is on (src/db/cancels.ts). */
    cancel: cancels.cancel,
    /** The socket whose server answered last: called from a query's settlement, that query's. */
    lastAnswered: answers.lastAnswered,
    /** Closes the connections idle since `before`: postgres.js sees them close and opens them anew. */
    closeIdleSince: answers.closeIdleSince,
    destroyAll: answers.destroyAll,
    stop: answers.stop
  }
}

export type Connector = ReturnType<typeof createConnector>
