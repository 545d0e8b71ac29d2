import { drizzle } from 'drizzle-orm/pglite'
import { migrate } from 'drizzle-orm/pglite/migrator'
import { sql } from 'drizzle-orm'
import type { PGlite } from '@electric-sql/pglite'
import * as schema from './schema.js'
import { withTimeout, type Database } from './database.js'
import type { PublicUser } from './schema.js'
import { MIGRATION_STATE_SQL, USERS_BY_IDS_SQL, userCopyPageSql } from './queries.js'

/** A PGlite database and what only PGlite can do: apply migrations in-process, dump its data dir. */
export interface PgliteDatabase {
  readonly database: Database
  migrate (migrationsFolder: string): Promise<void>
  /** The whole data directory, uncompressed, as `loadDataDir` takes it back. */
  dump (): Promise<Buffer>
}

/** PGlite in the process: a fresh in-memory database, or one restored from a data-dir snapshot. */
export async function connectPglite (snapshot?: Blob): Promise<PgliteDatabase> {
  const { PGlite } = await import('@electric-sql/pglite')
  const client: PGlite = await PGlite.create(snapshot ? { loadDataDir: snapshot } : {})
  const db = drizzle({ client, schema })
  const database: Database = {
    db,
    driver: 'pglite',
    ping: async (timeoutMs = 1000) => { await withTimeout(db.execute(sql`select 1`), timeoutMs) },
    async migrationState (timeoutMs = 1000) {
      const { rows: [row] } = await withTimeout(db.execute<{ applied: number, latest: string }>(sql.raw(MIGRATION_STATE_SQL)), timeoutMs)
      return { applied: row.applied, latest: Number(row.latest) }
    },
    async copyUserPage (page, onText) {
      // PGlite hands COPY's output over as one Blob.
      const { blob } = await client.query(userCopyPageSql(page, '\'/dev/blob\''))
      if (blob) onText(new Uint8Array(await blob.arrayBuffer()))
    },
    usersByIds: async (ids) => (await client.query<PublicUser>(USERS_BY_IDS_SQL, [ids])).rows,
    // One connection in the process, serialised by PGlite itself.
    poolStats: () => ({ max: 1, inFlight: 0, waiting: 0, acquireTimeouts: 0 }),
    close: () => client.close()
  }
  return {
    database,
    migrate: (migrationsFolder) => migrate(db, { migrationsFolder }),
    dump: async () => Buffer.from(await (await client.dumpDataDir('none')).arrayBuffer())
  }
}
