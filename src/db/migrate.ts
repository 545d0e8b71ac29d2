import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { parseDatabaseUrl } from '../config/database-url.js'
import { createConnector } from './connector.js'
import { clientOptions } from './postgres-options.js'
import { assertDriverPatched } from './postgres-internals.js'

/** Found from src/db (tsx) and dist/db (built) alike. */
export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url))

// Any constant works; it only has to be the same for every instance of this service.
const MIGRATION_LOCK_KEY = 727_001

/** drizzle-kit's journal of the migrations it wrote, oldest first: tag (`0000_init`) and timestamp. */
export function migrationJournal (): Array<{ tag: string, when: number }> {
  const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as { entries: Array<{ idx: number, tag: string, when: number }> }
  return journal.entries.sort((a, b) => a.idx - b.idx).map(({ tag, when }) => ({ tag, when }))
}

/** The migrations' tags, oldest first. */
export const migrationTags = (): string[] => migrationJournal().map((entry) => entry.tag)

/**
 * Applies pending migrations to PostgreSQL and returns the tags it applied. Several instances
 * may start at once: the lock is a transaction's (`pg_advisory_xact_lock`), held open on a
 * connection of its own while another runs Drizzle's migrator, so a transaction pooler, which
 * keeps a transaction on one server connection, cannot split it the way it would split a
 * session lock's take and release. The others wait (`onWaiting` is told so, once), then find
 * nothing to do. No server-side timeouts here: a migration may take longer than a request's
 * statement.
 */
export async function migratePostgresDatabase (url: string, { onWaiting }: { onWaiting?: (message: string) => void } = {}): Promise<string[]> {
  assertDriverPatched()
  const target = parseDatabaseUrl(url)
  // No answer deadline either; connecting is bounded as everywhere.
  const connector = createConnector(target, { connectTimeoutMs: 5000, answerDeadlineMs: Infinity })
  const options = { ...clientOptions(target, connector, { applicationName: 'user-management-migrations' }), max: 1, prepare: false, connect_timeout: 5 }
  const lock = postgres(options)
  const runner = postgres(options)
  // Seconds the clients get to finish at the end; none when no host took a connection.
  let endTimeout = 5
  try {
    // The lock's connection first, so that no host to connect to fails here, bounded, with its cause.
    await connector.started(() => lock`select 1`).catch((error: unknown) => { endTimeout = 0; throw error })
    return await lock.begin(async (tx) => {
      // Another instance migrating holds the lock for as long as its migrations take: said once.
      const [{ locked }] = await tx<Array<{ locked: boolean }>>`select pg_try_advisory_xact_lock(${MIGRATION_LOCK_KEY}) as locked`
      if (!locked) {
        onWaiting?.(`Waiting for another instance's migrations to finish (PostgreSQL advisory lock ${MIGRATION_LOCK_KEY})`)
        await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`
      }
      const before = await appliedCount(runner)
      await migratePostgres(drizzlePostgres({ client: runner }), { migrationsFolder })
      return migrationTags().slice(before, await appliedCount(runner))
    })
  } finally {
    connector.stop()
    await Promise.all([lock.end({ timeout: endTimeout }), runner.end({ timeout: endTimeout })])
  }
}

async function appliedCount (sql: postgres.Sql): Promise<number> {
  const [{ exists }] = await sql<Array<{ exists: boolean }>>`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`
  if (!exists) return 0
  const [{ applied }] = await sql<Array<{ applied: number }>>`select count(*)::int as applied from drizzle.__drizzle_migrations`
  return applied
}
