import type { ReservedSql, Sql } from 'postgres'
import { withTimeout } from './database.js'
import { AcquireTimeoutError, DatabaseTimeoutError } from './pg-errors.js'
import { BEGIN_WITH_TIMEOUTS } from './postgres-options.js'

/**
 * Statements behind a transaction pooler that refuses the server-side timeouts in the startup
 * packet (src/db/postgres-options.ts): each runs on a connection of its own, in a transaction
 * that sets them first, so the server still bounds it. Nothing is prepared by name: the pooler
 * may hand the next transaction to another server connection.
 */
export function createTransactions (client: Sql, acquireTimeoutMs: number, onAcquireTimeout: () => void) {
  let active = 0

  /** `work` on a connection of its own, in a transaction that sets the server-side timeouts first. */
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
    try {
      await reserved.unsafe(BEGIN_WITH_TIMEOUTS)
      const result = await work(reserved)
      await reserved.unsafe('commit')
      return result
    } catch (error) {
      await reserved.unsafe('rollback').catch(() => {})
      throw error
    } finally {
      active--
      reserved.release()
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
