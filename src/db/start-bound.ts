import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import { NotReadyError } from './pg-errors.js'

const RESET = new Set<unknown>(['ECONNRESET', 'EPIPE'])

/** No host of the URL took a connection while a client started: the hosts, and the last failure. */
export class StartTimeoutError extends Error {
  readonly code = 'UMS_DB_NO_HOST'
  constructor (message: string) {
    super(message)
    this.name = 'StartTimeoutError'
  }
}

/**
 * What a client's start waits on (src/db/connector.ts): the hosts' failures, the last one kept to
 * say why no connection came, and the connections that became ready.
 */
export function createStartBound (target: DatabaseTarget, connectTimeoutMs: number, now: () => number) {
  let lastFailure: Error | undefined
  let lastFailureAt = -Infinity
  /** Connections that reached ReadyForQuery: a single host's start is bounded only until one does. */
  let readyConnections = 0
  /** Told when every host failed in one round of the connector's `open`. */
  const roundWatchers = new Set<(error: Error) => void>()

  return {
    /** A host's failure, kept to say why no connection came; returned as given. */
    failure (error: Error): Error {
      lastFailure = error
      lastFailureAt = now()
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
      const attempts = async (): Promise<T> => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await ask()
          } catch (error) {
            // Reset before ready, a single host's connection fails in Node's words, which name no host.
            if (single && readyConnections === readyBefore && RESET.has((error as { code?: unknown }).code)) throw new NotReadyError(hosts, true)
            if (single || (error as { code?: unknown }).code !== 'CONNECT_TIMEOUT') throw error
            if (attempt >= target.hosts.length) throw new StartTimeoutError(`no host of ${hosts} took a connection; the last failure: ${(error as Error).message}`)
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
