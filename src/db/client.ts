import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import * as schema from './schema.js'
import { AcquireTimeoutError, DatabaseTimeoutError } from './errors.js'

export type AppDatabase = PgDatabase<PgQueryResultHKT, typeof schema>

/** What the pool is doing now (metrics). */
export interface PoolStats {
  /** Connections the pool may open. */
  readonly max: number
  /** Queries sent and not yet answered, or waiting for a connection. */
  readonly inFlight: number
  /** Of those, queries still waiting for a connection. */
  readonly waiting: number
  /** Queries refused because no connection came within the acquire timeout, since start. */
  readonly acquireTimeouts: number
}

/** One database for the whole app: the Drizzle handle plus what health checks and shutdown need. */
export interface Database {
  readonly db: AppDatabase
  readonly driver: 'pglite' | 'postgres'
  /** Resolves when `select 1` answers within `timeoutMs`, rejects otherwise. */
  ping (timeoutMs?: number): Promise<void>
  poolStats (): PoolStats
  close (): Promise<void>
}

export interface PostgresOptions {
  readonly url: string
  readonly poolMax: number
  readonly applicationName?: string
  /** Longest wait for a connection before a query fails with UMS_DB_ACQUIRE_TIMEOUT (CONTRACT §7: 1 s). */
  readonly acquireTimeoutMs?: number
}

/** The part of a postgres.js query this module relies on (postgres 3.4.x internals, pinned). */
interface PendingQuery extends Promise<unknown> {
  /** null until the query is handed to an open connection. */
  state: unknown
  reject: (error: unknown) => void
  cancel (): unknown
}

/** PostgreSQL through postgres.js, with the timeouts of CONTRACT §7. */
export function connectPostgres (options: PostgresOptions): Database {
  const client = postgres(options.url, {
    max: options.poolMax,
    // No pipelining: a query gets a connection of its own or waits in the pool's queue, so
    // "waiting for a connection" is a state the acquire timeout below can see and bound.
    // (A documented option that postgres.js's types leave out.)
    ...{ max_pipeline: 0 } as object,
    connect_timeout: 1,
    // postgres.js waits up to 20 s between connection attempts after repeated failures, so a
    // database back after an outage would sit unused that long; at most 1 s here, with
    // jitter. Connections are only attempted for a waiting query, so this adds no load.
    backoff: (retries) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? 'user-management',
      statement_timeout: 5000,
      idle_in_transaction_session_timeout: 10000
    }
  })
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 1000
  const inFlight = new Set<PendingQuery>()
  let acquireTimeouts = 0

  // postgres.js has no acquire timeout: a query waits in its queue, or behind connection
  // attempts and their back-off, for as long as the database stays away. So every query
  // Drizzle sends gets a timer; if the query is still not on a connection when it fires,
  // it is taken out of the queue (postgres.js's own cancel, which only unqueues an unsent
  // query) and fails with UMS_DB_ACQUIRE_TIMEOUT, which the error handler answers with 503.
  // Once sent, statement_timeout bounds it on the server.
  const unsafe = (...args: Parameters<typeof client.unsafe>) => {
    const query = client.unsafe(...args) as unknown as PendingQuery
    inFlight.add(query)
    const timer = setTimeout(() => {
      if (query.state !== null) return
      acquireTimeouts++
      const reject = query.reject
      query.reject = () => reject(new AcquireTimeoutError(acquireTimeoutMs))
      query.cancel()
    }, acquireTimeoutMs)
    const settle = () => { clearTimeout(timer); inFlight.delete(query) }
    query.then(settle, settle)
    return query
  }
  // Drizzle calls `unsafe` for every statement; everything else (options, begin) is the client's own.
  const guarded = new Proxy(client, {
    get: (target, property) => property === 'unsafe' ? unsafe : Reflect.get(target, property, target)
  })
  const db = drizzlePostgres({ client: guarded, schema })
  return {
    db,
    driver: 'postgres',
    ping: async (timeoutMs = 1000) => { await withTimeout(db.execute(sql`select 1`), timeoutMs) },
    poolStats: () => {
      let waiting = 0
      for (const query of inFlight) if (query.state === null) waiting++
      return { max: options.poolMax, inFlight: inFlight.size, waiting, acquireTimeouts }
    },
    close: () => client.end({ timeout: 5 })
  }
}

/** PGlite in the process: a fresh in-memory database, or one restored from a data-dir snapshot. */
export async function connectPglite (snapshot?: Blob): Promise<Database> {
  const { PGlite } = await import('@electric-sql/pglite')
  const client = await PGlite.create(snapshot ? { loadDataDir: snapshot } : {})
  const db = drizzlePglite({ client, schema })
  return {
    db,
    driver: 'pglite',
    ping: async (timeoutMs = 1000) => { await withTimeout(db.execute(sql`select 1`), timeoutMs) },
    // One connection in the process, serialised by PGlite itself.
    poolStats: () => ({ max: 1, inFlight: 0, waiting: 0, acquireTimeouts: 0 }),
    close: () => client.close()
  }
}

/** Resolves with `work`'s answer, or rejects with DatabaseTimeoutError after `ms`. */
export async function withTimeout<T> (work: PromiseLike<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  // Drizzle's query is a lazy thenable: resolve it once, and let a late failure after the timeout go unheard.
  const answer = Promise.resolve(work)
  answer.catch(() => {})
  try {
    return await Promise.race([answer, new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new DatabaseTimeoutError(ms)), ms) })])
  } finally {
    clearTimeout(timer)
  }
}
