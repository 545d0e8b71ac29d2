import type { Socket } from 'node:net'
import type { ReservedSql, Sql } from 'postgres'
import type { Connector } from './connector.js'
import { closeAtOnce } from './postgres-internals.js'
import { withTimeout } from './database.js'
import { AcquireTimeoutError, DatabaseTimeoutError } from './pg-errors.js'
import { BEGIN_WITH_TIMEOUTS } from './postgres-options.js'

/** A server's refusal within the session (severity ERROR): the connection stays usable after a rollback. */
const refusedInSession = (error: unknown): boolean => (error as { severity?: unknown } | undefined)?.severity === 'ERROR'

/**
 * Statements behind a transaction pooler that refuses the server-side timeouts in the startup
 * packet (src/db/postgres-options.ts): each runs on a connection of its own, in a transaction
 * that sets them first, so the server still bounds it. Nothing is prepared by name: the pooler
 * may hand the next transaction to another server connection.
 */
export function createTransactions (client: Sql, connector: Pick<Connector, 'lastAnswered'>, acquireTimeoutMs: number, onAcquireTimeout: () => void) {
  let active = 0

  /**
   * `work` on a connection of its own, in a transaction that sets the server-side timeouts first.
   * A reserved connection whose socket has closed is never used or released again: postgres.js
   * would write to its missing socket, which throws outside any promise and ends the process, or
   * hand it, dead, to the next query (src/db/postgres-internals.ts). One in an unknown state is
   * closed, and postgres.js opens it anew.
   */
  async function run<T> (work: (sql: ReservedSql) => Promise<T>): Promise<T> {
    const reserving = client.reserve()
    let reserved: ReservedSql
    try {
      reserved = await withTimeout(reserving, acquireTimeoutMs)
    } catch (error) {
      if (!(error instanceof DatabaseTimeoutError)) throw error
      onAcquireTimeout()
      // A connection that comes after all goes back at once.
      reserving.then((late) => late.release(), () => {})
      throw new AcquireTimeoutError(acquireTimeoutMs)
    }
    active++
    // Known once the server answers on this connection: a reaction to that answer, success or
    // refusal, runs before any other socket's data is handled.
    let socket: Socket | undefined
    let reusable = false
    try {
      await reserved.unsafe(BEGIN_WITH_TIMEOUTS)
      socket = connector.lastAnswered()
      const result = await work(reserved)
      await reserved.unsafe('commit')
      reusable = true
      return result
    } catch (error) {
      // A BEGIN the server refused: this reaction is to its answer.
      if (socket === undefined && refusedInSession(error)) socket = connector.lastAnswered()
      if (refusedInSession(error) && socket?.destroyed === false) {
        reusable = await reserved.unsafe('rollback').then(() => true, () => false)
      }
      throw error
    } finally {
      active--
      if (socket?.destroyed === false) {
        if (reusable) reserved.release()
        else closeAtOnce(socket)
      }
    }
  }

  /**
   * Drizzle's `client.unsafe(statement, params, options)`, optionally with `.values()`, in a
   * transaction of its own: a thenable Drizzle cannot tell from a query. `onQuery` sees the query.
   */
  function unsafe (statement: string, params: unknown[] | undefined, options: object | undefined, onQuery: (query: PromiseLike<unknown>) => void) {
    let values = false
    const execute = () => run(async (sql) => {
      const query = sql.unsafe(statement, params as never[], { ...options, prepare: false })
      onQuery(query)
      return await (values ? query.values() : query)
    })
    const lazy = {
      values: () => { values = true; return lazy },
      then: <A, B>(fulfilled?: (rows: unknown) => A, rejected?: (error: unknown) => B) => execute().then(fulfilled, rejected)
    }
    return lazy
  }

  return { run, unsafe, active: () => active }
}
