import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import type * as schema from './schema.js'
import type { PublicUser } from './schema.js'
import type { CopyPage } from './queries.js'
import { DatabaseTimeoutError } from './pg-errors.js'

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

/** Drizzle's bookkeeping of applied migrations, for readiness. */
interface MigrationState {
  readonly applied: number
  /** The newest applied migration's journal timestamp (ms), 0 when none. */
  readonly latest: number
}

/**
 * The one handle the rest of the service has on its database, whichever driver is behind it:
 * the Drizzle instance for ordinary queries, and the few things that need the driver itself.
 */
export interface Database {
  readonly db: AppDatabase
  readonly driver: 'pglite' | 'postgres'
  /** Resolves when `select 1` answers within `timeoutMs`, rejects otherwise. */
  ping (timeoutMs?: number): Promise<void>
  migrationState (timeoutMs?: number): Promise<MigrationState>
  /**
   * Users with an id above `page.after`, at most `page.size`, ordered by id: `page.columns` in
   * PostgreSQL's COPY text format, handed to `onText` in whole lines as they arrive.
   */
  copyUserPage (page: CopyPage, onText: (text: Uint8Array) => void): Promise<void>
  /** The public records of the users among `ids` (USERS_BY_IDS_SQL), in no particular order. */
  usersByIds (ids: readonly number[]): Promise<PublicUser[]>
  poolStats (): PoolStats
  close (): Promise<void>
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
