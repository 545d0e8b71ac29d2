import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js'
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { parseDatabaseUrl } from '../config/database-url.js'
import { createConnector } from './connector.js'
import { acceptsStartupTimeouts, clientOptions, type ServerTimeouts } from './postgres-options.js'
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

/** The tags a migration applied, and how many migrations the database then records (a newer release's too). */
export interface Migrated { readonly applied: string[], readonly recorded: number }

/** PostgreSQL's largest timeouts, INT_MAX milliseconds (24 days): none, for a migration. */
const NO_DEADLINES = { statementMs: 2_147_483_647, idleInTransactionMs: 2_147_483_647 }
/** How often a migrator that found the lock taken tries again. */
const LOCK_RETRY_MS = 250

/**
 * Applies pending migrations to PostgreSQL and returns the tags it applied. Several instances
 * may start at once: the lock is a transaction's (`pg_advisory_xact_lock`), held open on a
 * connection of its own while another runs Drizzle's migrator, so a transaction pooler, which
 * keeps a transaction on one server connection, cannot split it the way it would split a
 * session lock's take and release. The others try again every LOCK_RETRY_MS in short
 * transactions (`onWaiting` is told so, once) rather than wait inside one: through a pooler a
 * waiting transaction holds a server connection, and as many waiters as the pool has would
 * leave the holder none for its migrator. Migrations have no deadline of ours: the server's or
 * role's statement_timeout and idle_in_transaction_session_timeout are turned off for them; a
 * lock_timeout is kept, which stops a migration from queueing every request behind its lock.
 */
export async function migratePostgresDatabase (url: string, { onWaiting }: { onWaiting?: (message: string) => void } = {}): Promise<Migrated> {
  assertDriverPatched()
  const target = parseDatabaseUrl(url)
  // No answer deadline either; connecting is bounded as everywhere.
  const connector = createConnector(target, { connectTimeoutMs: 5000, answerDeadlineMs: Infinity })
  const options = (timeouts?: ServerTimeouts) => ({ ...clientOptions(target, connector, { applicationName: 'user-management-migrations', timeouts }), max: 1, prepare: false, connect_timeout: 5 })
  let lock = postgres(options())
  let runner: postgres.Sql | undefined
  let lockLost = false
  // Seconds the clients get to finish at the end; none when no host took a connection.
  let endTimeout = 5
  try {
    // The lock's connection first, so that no host to connect to fails here, bounded, with its cause.
    await connector.started(() => lock`select 1`).catch((error: unknown) => { endTimeout = 0; throw error })
    // At head, nothing is written: a start on a server that refuses writes for a while serves
    // reads. Read without the server's or role's statement_timeout, as the migrations run.
    const recorded = await lock.begin(async (tx) => {
      await tx`set local statement_timeout = 0`
      return await appliedCount(tx)
    })
    // The journal read once: each read is a file read and a parse.
    const tags = migrationTags()
    if (recorded >= tags.length) return { applied: [], recorded }
    // postgres.js's `primary` check, which the pool uses too, passes a primary set read-only: as
    // libpq's `read-write` does, each host that refuses writes is ranked behind the others
    // (src/db/host-order.ts) and the lock's connection opened again, until one takes them.
    for (let tried = 1; await readOnly(lock); tried++) {
      if (tried >= target.hosts.length) throw new ReadOnlyDatabaseError(target.hosts.length)
      connector.refusedWrite()
      await lock.end({ timeout: 0 })
      lock = postgres(options())
      await connector.started(() => lock`select 1`)
    }
    for (let waited = false; ; waited = true) {
      const held = lock.begin(async (tx) => {
        const [{ locked }] = await tx<Array<{ locked: boolean }>>`select pg_try_advisory_xact_lock(${MIGRATION_LOCK_KEY}) as locked`
        if (!locked) return undefined
        // SET LOCAL, which a transaction pooler keeps to the transaction: idle while the
        // migrations run on the other connection, it must outlive them.
        await tx`set local idle_in_transaction_session_timeout = 0`
        await tx`set local statement_timeout = 0`
        if (runner === undefined) {
          // Without the server's or the role's timeouts where the startup packet may say so; a
          // transaction pooler refuses that, and there they apply (DATABASE_MIGRATION_URL, a
          // direct connection, is the way around them).
          const unbounded = await acceptsStartupTimeouts(target, connector, NO_DEADLINES)
          // Lost while that was asked: the close below found no migrator to end.
          if (lockLost) throw new Error('the migration lock\'s connection closed')
          runner = postgres(options(unbounded ? NO_DEADLINES : undefined))
        }
        const before = await appliedCount(runner)
        await migratePostgres(drizzlePostgres({ client: runner }), { migrationsFolder })
        const recorded = await appliedCount(runner)
        return { applied: tags.slice(before, recorded), recorded }
      })
      // postgres.js fails the transaction as soon as its connection closes, while Drizzle's
      // migrator goes on over the other one: without the lock, another instance may migrate
      // too, so these migrations must not commit. Closed now, their transaction rolls back.
      held.catch(() => { lockLost = true; void runner?.end({ timeout: 0 }) })
      const applied = await held
      if (applied !== undefined) return applied
      if (!waited) onWaiting?.(`Waiting for another instance's migrations to finish (PostgreSQL advisory lock ${MIGRATION_LOCK_KEY})`)
      await sleep(LOCK_RETRY_MS)
    }
  } finally {
    connector.stop()
    await Promise.all([lock.end({ timeout: endTimeout }), runner?.end({ timeout: endTimeout })])
  }
}

/** Every host of the URL refuses writes while migrations are pending. */
export class ReadOnlyDatabaseError extends Error {
  readonly code = 'UMS_DB_READ_ONLY'
  constructor (hosts: number) {
    super(`migrations are pending and ${hosts > 1 ? `none of the ${hosts} hosts takes` : 'the server does not take'} writes (transaction_read_only is on: a demoted primary, or default_transaction_read_only set)`)
    this.name = 'ReadOnlyDatabaseError'
  }
}

async function readOnly (sql: postgres.Sql): Promise<boolean> {
  const [{ transaction_read_only: readOnly }] = await sql<Array<{ transaction_read_only: string }>>`show transaction_read_only`
  return readOnly === 'on'
}

async function appliedCount (sql: postgres.Sql | postgres.TransactionSql): Promise<number> {
  const [{ exists }] = await sql<Array<{ exists: boolean }>>`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`
  if (!exists) return 0
  const [{ applied }] = await sql<Array<{ applied: number }>>`select count(*)::int as applied from drizzle.__drizzle_migrations`
  return applied
}
