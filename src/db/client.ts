import { drizzle as drizzlePglite } from 'drizzle-orm/pglite'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import { sql } from 'drizzle-orm'
import postgres from 'postgres'
import * as schema from './schema.js'

export type AppDatabase = PgDatabase<PgQueryResultHKT, typeof schema>

/** One database for the whole app: the Drizzle handle plus what health checks and shutdown need. */
export interface Database {
  readonly db: AppDatabase
  readonly driver: 'pglite' | 'postgres'
  /** Resolves when `select 1` answers within `timeoutMs`, rejects otherwise. */
  ping (timeoutMs?: number): Promise<void>
  close (): Promise<void>
}

export interface PostgresOptions {
  readonly url: string
  readonly poolMax: number
  readonly applicationName?: string
}

/** PostgreSQL through postgres.js, with the timeouts of CONTRACT §7. */
export function connectPostgres (options: PostgresOptions): Database {
  const client = postgres(options.url, {
    max: options.poolMax,
    connect_timeout: 1,
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? 'user-management',
      statement_timeout: 5000,
      idle_in_transaction_session_timeout: 10000
    }
  })
  const db = drizzlePostgres({ client, schema })
  return {
    db,
    driver: 'postgres',
    ping: (timeoutMs = 1000) => withTimeout(db.execute(sql`select 1`), timeoutMs),
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
    ping: (timeoutMs = 1000) => withTimeout(db.execute(sql`select 1`), timeoutMs),
    close: () => client.close()
  }
}

async function withTimeout (work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([work, new Promise((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`database did not answer within ${ms} ms`)), ms) })])
  } finally {
    clearTimeout(timer)
  }
}
