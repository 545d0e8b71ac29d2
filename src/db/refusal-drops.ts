import type { Connector } from './connector.js'
import { refusedInSession, refusesWrites } from './pg-errors.js'
import { sameConnection, type PendingQuery } from './postgres-internals.js'
import type { createArrivalQueue } from '../http/arrival-queue.js'

/** Longest a connection that refused a write goes on serving what the pool hands it before it closes. */
const REFUSING_LINGER_MS = 1000

/**
 * A server that refuses writes (a demoted primary) loses the connection, so the next finds the
 * writable host: once nothing else runs on it. postgres.js hands the connection the next waiting
 * query as it settles the refused one, before any reaction to that: closed then, the connection
 * would fail that query (a read, which the server still serves, 503).
 */
export function createRefusalDrops (inFlight: ReturnType<typeof createArrivalQueue<PendingQuery>>, connector: Pick<Connector, 'refusedWrite'>) {
  /** The pool's COPY queries, each with the end of its rows. */
  const copies = new WeakMap<PendingQuery, Promise<void>>()

  /**
   * Calls `close` once `settled`'s connection has no query after it (each handed to it as the
   * last one ends): a query's end is its settlement, a COPY's the end of its rows (its query
   * settles once they start). A pool never idle would keep handing it queries, writes the server
   * refuses among them, while another host may take them: past `until` it closes after the
   * query that ends then, whatever was handed to it next.
   */
  function closeWhenIdle (settled: PendingQuery, close: () => void, until: number): void {
    let next: PendingQuery | undefined
    inFlight.sweep(Infinity, (query) => {
      if (next === undefined && query !== settled && sameConnection(query, settled)) next = query
      return 'keep'
    })
    if (next === undefined || Date.now() > until) return close()
    const after = next
    const again = () => { closeWhenIdle(after, close, until) }
    const end: PromiseLike<unknown> = copies.get(after) ?? after
    end.then(again, again)
  }

  return {
    /** Watches a tracked query: refused as a write, its connection goes (above). */
    dropIfRefusing (query: PendingQuery): void {
      // A refusal within the session only (severity ERROR): a FATAL one (57P01 as the server shuts
      // down) comes with its connection's close, a later turn, when the socket that answered last
      // may be another connection's; the connector ranks a host whose connections close early.
      query.then(undefined, (error: unknown) => {
        if (refusesWrites(error) && refusedInSession(error)) closeWhenIdle(query, connector.refusedWrite(error as object), Date.now() + REFUSING_LINGER_MS)
      })
    },
    /** A COPY query and the end of its rows, which is its end here. */
    copying (query: PendingQuery, copied: Promise<void>): Promise<void> {
      copies.set(query, copied)
      return copied
    }
  }
}
