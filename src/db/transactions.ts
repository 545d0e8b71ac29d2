import type { Socket } from 'node:net'
import type { ReservedSql, Sql } from 'postgres'
import type { Connector } from './connector.js'
import { closeAtOnce, type PendingQuery } from './postgres-internals.js'
import { withTimeout } from './database.js'
import { AcquireTimeoutError, DatabaseTimeoutError, StatementCancelledError, refusedInSession } from './pg-errors.js'
import { BEGIN_WITH_TIMEOUTS } from './postgres-options.js'

/** One statement on the transaction's connection: Drizzle's `unsafe(statement, params, options)`. */
export type Send = (statement: string, params?: unknown[], options?: object) => PendingQuery

/**
 * Statements behind a transaction pooler that refuses the server-side timeouts in the startup
 * packet (src/db/postgres-options.ts): each runs on a connection of its own, in a transaction
 * that sets them first, so the server still bounds it. Nothing is prepared by name: the pooler
 * may hand the next transaction to another server connection. Every statement, BEGIN and
 * COMMIT too, goes through `track`: the pool's sweep cancels it past statement_timeout, as it
 * does the pool's own (a COMMIT waiting for a synchronous standby that is gone).
 */
export function createTransactions (client: Sql, connector: Pick<Connector, 'lastAnswered' | 'recentFailure'>, acquireTimeoutMs: number, track: (query: PendingQuery) => PendingQuery, onAcquireTimeout: () => void) {
  /**
   * `work` on a connection of its own, in a transaction that sets the server-side timeouts first.
   * A reserved connection whose socket has closed is never used or released again: postgres.js
   * would write to its missing socket, which throws outside any promise and ends the process, or
   * hand it, dead, to the next query (src/db/postgres-internals.ts). One in an unknown state
   * (a statement failed other than by the server's refusal, or was cancelled: a CancelRequest
   * may still be on its way to whatever the connection runs next) is closed, and postgres.js
   * opens it anew.
   */
  async function run<T> (work: (send: Send) => Promise<T>): Promise<T> {
    const reserving = client.reserve()
    let reserved: ReservedSql
    try {
      reserved = await withTimeout(reserving, acquireTimeoutMs)
    } catch (error) {
      if (!(error instanceof DatabaseTimeoutError)) throw error
      onAcquireTimeout()
      // A connection that comes after all goes back at once.
      reserving.then((late) => late.release(), () => {})
      // With what kept the connection away, as the pool's own acquire timeout says (src/db/postgres.ts).
      throw new AcquireTimeoutError(acquireTimeoutMs, connector.recentFailure(acquireTimeoutMs))
    }
    const send: Send = (statement, params, options) => track(reserved.unsafe(statement, params as never[], options) as unknown as PendingQuery)
    // Known once the server answers on this connection: a reaction to that answer, success or
    // refusal, runs before any other socket's data is handled.
    let socket: Socket | undefined
    let reusable = false
    try {
      await send(BEGIN_WITH_TIMEOUTS)
      socket = connector.lastAnswered()
      const result = await work(send)
      await send('commit')
      reusable = true
      return result
    } catch (error) {
      // A BEGIN the server refused, or answered once cancelled (a StatementCancelledError is
      // only ever the server's answer, src/db/postgres.ts): this reaction is to that answer.
      if (socket === undefined && (refusedInSession(error) || error instanceof StatementCancelledError)) socket = connector.lastAnswered()
      if (refusedInSession(error) && socket?.destroyed === false) {
        reusable = await send('rollback').then(() => true, () => false)
      }
      throw error
    } finally {
      if (socket?.destroyed === false) {
        if (reusable) reserved.release()
        else closeAtOnce(socket)
      }
    }
  }

  /**
   * Drizzle's `client.unsafe(statement, params, options)`, optionally with `.values()`, in a
   * transaction of its own: a thenable Drizzle cannot tell from a query.
   */
  function unsafe (statement: string, params: unknown[] | undefined, options: object | undefined) {
    let values = false
    const execute = () => run(async (send) => {
      const query = send(statement, params, { ...options, prepare: false }) as PendingQuery & { values: () => PromiseLike<unknown> }
      return await (values ? query.values() : query)
    })
    const lazy = {
      values: () => { values = true; return lazy },
      then: <A, B>(fulfilled?: (rows: unknown) => A, rejected?: (error: unknown) => B) => execute().then(fulfilled, rejected)
    }
    return lazy
  }

  return { run, unsafe }
}
