import { fileURLToPath } from 'node:url'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'

/** Found from src/db (tsx) and dist/db (built) alike. */
export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url))

// Any constant works; it only has to be the same for every instance of this service.
const MIGRATION_LOCK_KEY = 727_001

/**
 * Applies pending migrations to PostgreSQL. Several instances may start at once, so the
 * migrator runs under a session advisory lock on a connection of its own (lock and unlock
 * must share a session); the others wait, then find nothing to do.
 */
export async function migratePostgresDatabase (url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 })
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`
    try {
      await migratePostgres(drizzlePostgres({ client: sql }), { migrationsFolder })
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`
    }
  } finally {
    await sql.end({ timeout: 5 })
  }
}
