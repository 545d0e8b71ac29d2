import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import { NotReadyError } from './pg-errors.js'

const RESET = new Set<unknown>(['ECONNRESET', 'EPIPE'])

/** No host of the URL took a connection while a client started: the hosts, and why each did not. */
export class StartTimeoutError extends Error {
  readonly code = 'UMS_DB_NO_HOST'
  constructor (message: string) {
    super(message)
    this.name = 'StartTimeoutError'
  }
}

/**
 * What a client's start waits on (src/db/connector.ts): the hosts' failures, the last one and
 * each host's last kept to say why no connection came, and the connections that became ready.
 */
export function createStartBound (target: DatabaseTarget, connectTimeoutMs: number, now: () => number) {
  let lastFailure: Error | undefined
  let lastFailureAt = -Infinity
  /** Each host's last failure, by its name (`host:port`). */
  const failures = new Map<string, Error>()
  const names = target.hosts.map(describeHost)

  /**
   * Why no host took the connection: with several, each host's last failure in the URL's order
   * (one host's alone would send the operator to it while another is down for another reason),
   * the host named where its message does not. `last`, a connection's error from postgres.js
   * (its connect timeout), is its host's latest: our own record of it may come a turn later.
   */
  function why (last?: Error): string {
    const { address, port } = (last ?? {}) as { address?: unknown, port?: unknown }
    if (typeof address === 'string' && typeof port === 'number') failures.set(describeHost({ host: address, port }), last!)
    const each = names.flatMap((name) => {
      const message = failures.get(name)?.message
      return message === undefined ? [] : [message.includes(name) ? message : `${name}: ${message}`]
    })
    if (names.length > 1 && each.length > 0) return `; each host's last failure: ${each.join('; ')}`
    const error = last ?? lastFailure
    return error === undefined ? '' : `; the last failure: ${error.message}`
  }
  /** Connections that reached ReadyForQuery: a single host's start is bounded only until one does. */
  let readyConnections = 0
  /** Told when every host failed in one round of the connector's `open`. */
  const roundWatchers = new Set<(error: Error) => void>()

  return {
    /** A failure of the host named `server`, kept to say why no connection came; returned as given. */
    failure (error: Error, server: string): Error {
      lastFailure = error
      lastFailureAt = now()
      failures.set(server, error)
      return error
    },
    ready (): void {
      readyConnections++
    },
    /** Every host failed in one round of `open`, the last with `error`. */
    roundFailed (error: Error): void {
      for (const watcher of roundWatchers) watcher(error)
    },
    /** The last host's failure to connect, if it came within `ms`: why a query found no connection. */
    recentFailure: (ms: number): Error | undefined => now() - lastFailureAt <= ms ? lastFailure : undefined,

    /**
     * A client's first query at start-up, or a StartTimeoutError once every host of several failed
     * in one round, or none took the connection within every host's connect timeout and a second
     * more (at least 5 s): postgres.js retries a first query for good while its connections close
     * before they are ready (each a standby; a proxy whose database is down). A single host's
     * refusal reaches the query at once, in postgres.js's words, and once one of its connections
     * is ready the query is left to the bounds of a query (a slow server still starts). With
     * several hosts, a first query failed by postgres.js's connect timeout (a host that took the
     * connection and stayed silent) is asked again, once per host, as libpq goes on to the next
     * host: the connector tries the silent one last.
     */
    async started<T> (ask: () => PromiseLike<T>): Promise<T> {
      const single = target.hosts.length === 1
      const readyBefore = readyConnections
      const hosts = names.join(', ')
      const ms = Math.max(5000, target.hosts.length * connectTimeoutMs + 1000)
      let timer: NodeJS.Timeout | undefined
      let watcher: ((error: Error) => void) | undefined
      const failed = new Promise<never>((_resolve, reject) => {
        watcher = (error) => reject(new StartTimeoutError(`no host of ${hosts} took a connection${why(error)}`))
        if (!single) roundWatchers.add(watcher)
        timer = setTimeout(() => {
          if (single && readyConnections > readyBefore) return
          reject(new StartTimeoutError(`no host of ${hosts} took a connection within ${ms} ms${why()}`))
        }, ms)
      })
      const attempts = async (): Promise<T> => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await ask()
          } catch (error) {
            // Reset before ready, a single host's connection fails in Node's words, which name no host.
            if (single && readyConnections === readyBefore && RESET.has((error as { code?: unknown }).code)) throw new NotReadyError(hosts, true)
            if (single || (error as { code?: unknown }).code !== 'CONNECT_TIMEOUT') throw error
            if (attempt >= target.hosts.length) throw new StartTimeoutError(`no host of ${hosts} took a connection${why(error as Error)}`)
          }
        }
      }
      try {
        return await Promise.race([attempts(), failed])
      } finally {
        clearTimeout(timer)
        roundWatchers.delete(watcher!)
      }
    }
  }
}
