import type { Config } from '../config/index.js'
import type { Database } from './database.js'
import { migratePostgresDatabase } from './migrate.js'
import { connectPostgres } from './postgres.js'

export interface OpenOptions {
  /**
   * The PostgreSQL database at DATABASE_URL whatever the profile: the CLI and the tests change
   * stored data there, while the development service keeps its PGlite.
   */
  readonly persistent?: boolean
  readonly poolMax?: number
  readonly applicationName?: string
  /** Told when the migrations wait for another instance's (src/db/migrate.ts). */
  readonly onMigrationWait?: (message: string) => void
}

/** There is no persistent database to open: development without DATABASE_URL. */
export class NoPersistentDatabaseError extends Error {
  constructor () {
    super('no DATABASE_URL: the development profile\'s PGlite lives inside the server process')
    this.name = 'NoPersistentDatabaseError'
  }
}

/**
 * The one place that decides which database the service talks to: PGlite in development
 * (from a snapshot of the migrated schema, src/db/snapshot.ts), PostgreSQL in production,
 * migrated to head under a lock before the pool opens (unless MIGRATIONS=off).
 */
export async function openDatabase (config: Pick<Config, 'profile' | 'databaseUrl' | 'databaseMigrationUrl' | 'migrations' | 'dbPoolMax'>, options: OpenOptions = {}): Promise<Database> {
  const postgres = config.profile === 'production' || options.persistent
  if (!postgres) {
    // Imported here: drizzle's PGlite driver imports all of PGlite, which production never runs.
    const { openMigratedPglite } = await import('./snapshot.js')
    return (await openMigratedPglite()).database
  }
  // loadConfig guarantees a URL in production.
  const url = config.databaseUrl
  if (!url) throw new NoPersistentDatabaseError()
  // With MIGRATIONS=off the service starts on whatever schema is there, and is not ready until it is at head.
  if (config.migrations === 'on-start') await migratePostgresDatabase(config.databaseMigrationUrl ?? url, { onWaiting: options.onMigrationWait })
  return await connectPostgres({ url, poolMax: options.poolMax ?? config.dbPoolMax, applicationName: options.applicationName })
}
