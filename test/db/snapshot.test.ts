import { appendFile, cp, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import { sql } from 'drizzle-orm'
import type { Database } from '../../src/db/database.js'
import { migrationsFolder } from '../../src/db/migrate.js'
import { migrationsHash, openMigratedPglite, snapshotFileName } from '../../src/db/snapshot.js'

const rowsOf = async (database: Database, query: ReturnType<typeof sql>) =>
  [...(await database.db.execute(query) as unknown as { rows: unknown[] }).rows]

/** Everything the migrations decide, read from the catalog, plus drizzle's journal. */
async function describe (database: Database) {
  const rows = (query: ReturnType<typeof sql>) => rowsOf(database, query)
  return {
    columns: await rows(sql`select table_name, column_name, data_type, column_default, is_nullable, is_identity, identity_generation
      from information_schema.columns where table_schema = 'public' order by table_name, ordinal_position`),
    constraints: await rows(sql`select conrelid::regclass::text as on_table, conname, pg_get_constraintdef(oid) as definition
      from pg_constraint where connamespace = 'public'::regnamespace order by conname`),
    indexes: await rows(sql`select tablename, indexname, indexdef from pg_indexes where schemaname = 'public' order by indexname`),
    sequences: await rows(sql`select sequencename, start_value, max_value, last_value from pg_sequences where schemaname = 'public' order by sequencename`),
    journal: await rows(sql`select hash, created_at::text as created_at from drizzle.__drizzle_migrations order by id`),
    userCount: await rows(sql`select count(*)::int as n from users`)
  }
}

const databaseNames = (database: Database) => rowsOf(database, sql`select datname from pg_database order by datname`)

const usersColumns = (columns: unknown[]) =>
  (columns as Array<{ table_name: string, column_name: string }>).filter((c) => c.table_name === 'users').map((c) => c.column_name)

const expectedJournal = (folder: string) =>
  readMigrationFiles({ migrationsFolder: folder }).map((m) => ({ hash: m.hash, created_at: String(m.folderMillis) }))

t.test('a snapshot-started database has exactly the schema and journal of a cold, migrated one', async (t) => {
  const cacheDir = t.testdir()
  // A cold start (initdb, then every migration) is the reference the snapshot must reproduce.
  const first = await openMigratedPglite({ cacheDirs: [cacheDir] })
  t.teardown(() => first.database.close())
  t.equal(first.source, 'created', 'no snapshot yet: cold start, then one is written')
  t.equal(first.file, join(cacheDir, snapshotFileName(await migrationsHash())))
  const reference = await describe(first.database)
  t.strictSame(usersColumns(reference.columns), ['id', 'username', 'email', 'password_hash', 'role', 'created_at', 'username_key'], 'the reference has the migrated users table')
  t.strictSame(reference.journal, expectedJournal(migrationsFolder), 'the reference journal lists every migration in drizzle/')
  t.strictSame(reference.userCount, [{ n: 0 }], 'and no rows')

  const second = await openMigratedPglite({ cacheDirs: [cacheDir] })
  t.teardown(() => second.database.close())
  t.equal(second.source, 'loaded', 'the second start restores the snapshot')
  t.equal(second.file, first.file)
  t.strictSame(await describe(second.database), reference, 'same tables, columns, constraints, indexes, sequences and journal; no rows')
  // The template databases are left out of the snapshot, which makes restoring it faster.
  t.strictSame(await databaseNames(first.database), [{ datname: 'postgres' }], 'the cold-started database dropped the templates before its dump')
  t.strictSame(await databaseNames(second.database), [{ datname: 'postgres' }], 'the restored one has only the database the service uses')
})

t.test('a change to the migrations makes a new snapshot; the old one is never used for them', async (t) => {
  const root = t.testdir({ cache: {} })
  const cacheDir = join(root, 'cache')
  const folder = join(root, 'drizzle')
  await cp(migrationsFolder, folder, { recursive: true })
  t.equal(await migrationsHash(folder), await migrationsHash(), 'the hash depends on contents, not on where drizzle/ is')

  // The snapshot of the current migrations, as a development start leaves it.
  const current = await openMigratedPglite()
  await current.database.close()
  const before = { file: join(cacheDir, snapshotFileName(await migrationsHash(folder))) }
  await cp(current.file, before.file)

  // A second migration, as drizzle-kit would write it.
  const journalFile = join(folder, 'meta', '_journal.json')
  const journal = JSON.parse(await readFile(journalFile, 'utf8'))
  const last = journal.entries.at(-1)
  journal.entries.push({ idx: last.idx + 1, version: last.version, when: last.when + 1000, tag: '0099_nickname', breakpoints: true })
  await writeFile(journalFile, JSON.stringify(journal, null, 2))
  await writeFile(join(folder, '0099_nickname.sql'), 'ALTER TABLE "users" ADD COLUMN "nickname" text;')
  t.not(await migrationsHash(folder), await migrationsHash(), 'a new migration changes the hash')

  const after = await openMigratedPglite({ migrationsFolder: folder, cacheDirs: [cacheDir] })
  t.teardown(() => after.database.close())
  t.equal(after.source, 'created', 'the old snapshot is not loaded')
  t.not(after.file, before.file)
  const described = await describe(after.database)
  t.strictSame(usersColumns(described.columns), ['id', 'username', 'email', 'password_hash', 'role', 'created_at', 'username_key', 'nickname'])
  t.strictSame(described.journal, expectedJournal(folder))
  t.equal(described.journal.length, expectedJournal(migrationsFolder).length + 1)

  const again = await openMigratedPglite({ migrationsFolder: folder, cacheDirs: [cacheDir] })
  t.teardown(() => again.database.close())
  t.equal(again.source, 'loaded')
  t.strictSame(await describe(again.database), described)

  // Editing an applied migration in place (never done, but possible) also changes the key.
  const unedited = await migrationsHash(folder)
  await appendFile(join(folder, '0099_nickname.sql'), '\n-- edited')
  t.not(await migrationsHash(folder), unedited)
})

t.test('a damaged snapshot is thrown away and the database starts cold', async (t) => {
  const cacheDir = t.testdir()
  const file = join(cacheDir, snapshotFileName(await migrationsHash()))
  await writeFile(file, 'not a tar file')
  const opened = await openMigratedPglite({ cacheDirs: [cacheDir] })
  t.teardown(() => opened.database.close())
  t.equal(opened.source, 'created')
  const described = await describe(opened.database)
  t.strictSame(described.journal, expectedJournal(migrationsFolder))
  t.strictSame(described.userCount, [{ n: 0 }])
  t.ok((await readFile(file)).length > 1_000_000, 'a real snapshot replaced the damaged file')
})
