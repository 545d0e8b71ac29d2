import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { openAsBlob } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'drizzle-orm'
import type { Database } from './database.js'
import { connectPglite, type PgliteDatabase } from './pglite.js'
import { migrationsFolder as defaultMigrationsFolder } from './migrate.js'

/**
 * Development start-up: PGlite's cold start (initdb inside WASM) takes 2–3 s and every hot
 * reload pays it again, while restoring a data-dir snapshot of the migrated, still empty
 * database takes a fraction of that. The snapshot is a cache, never a source of truth: its
 * file name carries a hash of every file under drizzle/ and of the PGlite version, so any
 * change to the migrations (or an upgrade of PGlite) makes a new one at the next start.
 */
export interface SnapshotOptions {
  readonly migrationsFolder?: string
  /** Where snapshots are kept, first writable one wins; defaults to node_modules/.cache/ums, then the OS temp dir. */
  readonly cacheDirs?: readonly string[]
}

export interface SnapshotOpening {
  readonly database: Database
  /** `loaded`: restored from a cached snapshot; `created`: cold start, snapshot written for next time. */
  readonly source: 'loaded' | 'created'
  readonly file: string
}

const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
export const defaultCacheDirs: readonly string[] = [join(projectRoot, 'node_modules', '.cache', 'ums'), join(tmpdir(), 'ums-cache')]

/** Names what a snapshot holds beyond the migrations, so a change to it also makes a new one. */
const SNAPSHOT_LAYOUT = 'postgres database only'

/** sha256 over the relative path and bytes of every file under the migrations folder, plus the PGlite version and the snapshot's layout. */
export async function migrationsHash (folder: string = defaultMigrationsFolder): Promise<string> {
  const hash = createHash('sha256').update(`pglite ${await pgliteVersion()}\0${SNAPSHOT_LAYOUT}\0`)
  const files = (await readdir(folder, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .sort()
  for (const file of files) {
    hash.update(relative(folder, file).split(sep).join('/')).update('\0').update(await readFile(file)).update('\0')
  }
  return hash.digest('hex').slice(0, 32)
}

/** The name of the snapshot file for a migrations hash. */
export function snapshotFileName (hash: string): string {
  return `pglite-migrated-${hash}.tar`
}

/**
 * A PGlite database migrated to the head of `drizzle/`: restored from the cached snapshot
 * when there is one for the current migrations, otherwise created cold, migrated, rid of
 * the template databases and dumped for the next start (so both hold only `postgres`).
 * Migrations also run after a restore, where they find nothing to do: the journal inside
 * the snapshot is checked, not trusted.
 */
export async function openMigratedPglite (options: SnapshotOptions = {}): Promise<SnapshotOpening> {
  const folder = options.migrationsFolder ?? defaultMigrationsFolder
  const dirs = options.cacheDirs ?? defaultCacheDirs
  const name = snapshotFileName(await migrationsHash(folder))

  for (const dir of dirs) {
    const file = join(dir, name)
    // A Blob backed by the file: PGlite reads it whole, and Node 20 reads a Blob made from a
    // Buffer back in small pieces (about 200 ms more for the 40 MB snapshot).
    // (openAsBlob throws at once when the file is missing.)
    const saved = await Promise.resolve(file).then(openAsBlob).catch(() => undefined)
    if (!saved) continue
    let opened: PgliteDatabase | undefined
    try {
      opened = await connectPglite(saved)
      await opened.migrate(folder)
      return { database: opened.database, source: 'loaded', file }
    } catch {
      // A damaged file (disk full, foreign write): forget it and start cold.
      await opened?.database.close().catch(() => {})
      await rm(file, { force: true })
    }
  }

  const cold = await connectPglite()
  await cold.migrate(folder)
  await dropTemplateDatabases(cold.database)
  // Uncompressed: a gzip snapshot is 9× smaller but restores about twice as slowly.
  const file = await saveSnapshot(dirs, name, await cold.dump())
  return { database: cold.database, source: 'created', file: file ?? '' }
}

/**
 * template0 and template1 are two thirds of the data dir's files and a third of its bytes, and
 * are only ever read by CREATE DATABASE, which nothing run against this in-process database
 * does: without them a restore takes about 100 ms less.
 */
async function dropTemplateDatabases (database: Database): Promise<void> {
  // One statement a call: DROP DATABASE refuses to run inside a multi-statement string.
  for (const name of ['template0', 'template1']) {
    await database.db.execute(sql.raw(`alter database ${name} is_template false`))
    await database.db.execute(sql.raw(`drop database ${name}`))
  }
}

/** Writes atomically (temp file, then rename), so a parallel start never reads half a snapshot. */
async function saveSnapshot (dirs: readonly string[], name: string, dump: Buffer): Promise<string | undefined> {
  for (const dir of dirs) {
    const file = join(dir, name)
    const partial = `${file}.${randomBytes(6).toString('hex')}.partial`
    try {
      await mkdir(dir, { recursive: true })
      await writeFile(partial, dump)
      await rename(partial, file)
      return file
    } catch {
      // Read-only node_modules, say: try the next place. Without any, every start is cold.
      await rm(partial, { force: true }).catch(() => {})
    }
  }
  return undefined
}

let version: Promise<string> | undefined
/** The installed PGlite's version: a data dir is only valid for the PostgreSQL build that wrote it. */
function pgliteVersion (): Promise<string> {
  version ??= (async () => {
    let dir = dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite')))
    for (;;) {
      const manifest = await readFile(join(dir, 'package.json'), 'utf8').then(JSON.parse).catch(() => undefined)
      if (manifest?.name === '@electric-sql/pglite') return String(manifest.version)
      const parent = dirname(dir)
      if (parent === dir) return 'unknown'
      dir = parent
    }
  })()
  return version
}
