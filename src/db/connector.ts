import type { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import { createHostOrder } from './host-order.js'
import { createStartBound } from './start-bound.js'
import { connectTo } from './connect-to.js'
import { tlsSettings } from './tls.js'
import { closeAtOnce, failStarting, failingSocket, nameForErrors } from './postgres-internals.js'
import { createAnswerWatch } from './answer-watch.js'
import { createCancels } from './cancels.js'
import { NotPostgresError, StartupRefusedError, fatalAnswer, readStartupAnswer } from './startup-answer.js'
import { NotReadyError } from './pg-errors.js'

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
  const hosts = createHostOrder(target.hosts.length, target.targetSessionAttrs === 'any', now)
  const starts = createStartBound(target, connectTimeoutMs, now)
  /** Sockets whose close says nothing against their host: dropped for a refused write, or one that answered a start's query. */
  const notRefusals = new WeakSet<Socket>()
  const connectHost = (index: number) => connectTo(target.hosts[index], target.sslMode, tls, connectTimeoutMs)
  const cancels = createCancels(connectHost, connectTimeoutMs)

  /**
   * Watched for answers, and its server's answer to the startup message read: its key, for a
   * cancel; a refusal, kept as the host's last failure (with several hosts postgres.js moves on
   * without a word); an answer postgres.js cannot read (another protocol, a postmaster's
   * text-only error), failed at once, where postgres.js alone would wait on it for good. A
   * connection that closes soon after it opened pauses its host, unless we closed it for a
   * refused write: that host ranks as one, ahead of the failed (src/db/host-order.ts).
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
        starts.ready()
        // The next data answers a query: postgres.js took the connection (a standby where a
        // primary is wanted is closed unasked), so new connections go to this host first; or,
        // a fatal error, is why no connection could be had.
        socket.once('data', (chunk: Buffer) => {
          hosts.served(hostIndex)
          const fatal = fatalAnswer(chunk)
          if (fatal) starts.failure(new StartupRefusedError(server, fatal, true), server)
        })
      },
      onRefused: (refusal) => {
        startup = 'refused'
        const error = starts.failure(new StartupRefusedError(server, refusal), server)
        if (refusal.legacy) failStarting(socket, error)
      },
      onForeign: () => { startup = 'refused'; failStarting(socket, starts.failure(new NotPostgresError(server), server)) }
    })
    socket.once('end', () => { serverEnded = true })
    socket.once('close', () => {
      if (startup === 'answering') {
        // The server hung up unasked, or stayed silent until postgres.js's connect timeout closed
        // it (a hung server takes the TCP connection): the next connections try the others first,
        // as libpq's per-host connect_timeout goes on to the next host.
        starts.failure(new NotReadyError(server, serverEnded), server)
        hosts.avoid(hostIndex)
      } else if (now() - opened < SHORT_LIVED_MS && !notRefusals.has(socket)) hosts.avoid(hostIndex)
    })
    // postgres.js listens for errors once it has the socket; until then one must not crash the process.
    socket.on('error', () => {})
    return answers.watch(socket, server)
  }

  /** postgres.js's factory: a connected socket, or one that fails with the last host's error. */
  async function open (): Promise<Socket> {
    let lastError: Error = new Error('no host to connect to')
    // Every host just failed or was just refused: wait for the first to be tried again (bounded).
    const wait = hosts.untilFree()
    if (wait > 0) await sleep(Math.min(wait, PAUSE_MS))
    for (const index of hosts.next()) {
      try {
        return watched(await connectHost(index), index)
      } catch (error) {
        lastError = starts.failure(error as Error, describeHost(target.hosts[index]))
        hosts.avoid(index)
      }
    }
    starts.roundFailed(lastError)
    return failingSocket(lastError)
  }

  return {
    open,
    /** A client's first query at start-up, bounded (src/db/start-bound.ts). */
    async started<T> (ask: () => PromiseLike<T>): Promise<T> {
      const result = await starts.started(ask)
      // This reaction is to the query's answer: the last socket answered is its own.
      const socket = answers.lastAnswered()
      if (socket) notRefusals.add(socket)
      return result
    },
    recentFailure: starts.recentFailure,
    /**
     * The server that answered last refused a write: its host is ranked so at once
     * (src/db/host-order.ts), and the returned function closes that connection (nothing once it
     * has closed), when nothing else is to run on it (src/db/refusal-drops.ts). Called from the
     * rejection of a refusal within the session (severity ERROR), which postgres.js settles while
     * handling that very answer: its reactions run before any other socket's data is handled.
     */
    refusedWrite: (refusal?: object): (() => void) => {
      const socket = answers.lastAnswered()
      if (!socket) return () => {}
      const index = hostOf.get(socket) ?? 0
      // `refusal`, that error, names its server in the log: with several hosts, the one to look at (CONTRACT §7).
      if (refusal) Object.assign(refusal, { address: target.hosts[index].host, port: target.hosts[index].port })
      hosts.refusedWrite(index)
      notRefusals.add(socket)
      return () => { if (!socket.destroyed) closeAtOnce(socket) }
    },
    /** Cancels what a connection of ours runs, on the host that connection is on (src/db/cancels.ts). */
    cancel: cancels.cancel,
    /** The socket whose server answered last: called from a query's settlement, that query's. */
    lastAnswered: answers.lastAnswered,
    destroyAll: answers.destroyAll,
    stop: answers.stop
  }
}

export type Connector = ReturnType<typeof createConnector>
