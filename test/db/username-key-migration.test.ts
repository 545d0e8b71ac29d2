import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import argon2 from 'argon2'
import { sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/postgres-js'
import { migrate } from 'drizzle-orm/postgres-js/migrator'
import postgres from 'postgres'
import { buildCheckedApp } from '../openapi/conformance.js'
import type { Database } from '../../src/db/database.js'
import { migrationsFolder } from '../../src/db/migrate.js'
import { openDatabase } from '../../src/db/open-database.js'
import { connectPglite } from '../../src/db/pglite.js'
import { usernameKey } from '../../src/users/user.js'
import { assertLoggedIn, assertSignedUp, createPostgresDatabase, rowsOf, testConfig, testDatabases, type DatabaseKind } from '../helper.js'

/** A migrations folder holding only the first migration: the schema before username_key. */
async function initialMigrationOnly (t: Test): Promise<string> {
  const folder = t.testdir()
  await mkdir(join(folder, 'meta'))
  const journal = JSON.parse(await readFile(join(migrationsFolder, 'meta', '_journal.json'), 'utf8'))
  const [first] = journal.entries
  await writeFile(join(folder, 'meta', '_journal.json'), JSON.stringify({ ...journal, entries: [first] }))
  await copyFile(join(migrationsFolder, `${first.tag}.sql`), join(folder, `${first.tag}.sql`))
  return folder
}

/** A database at the first migration, filled by `fill`, then migrated to head by the service's own code. */
async function migratedAfter (t: Test, kind: DatabaseKind, fill: (run: (query: ReturnType<typeof sql>) => Promise<unknown>) => Promise<void>): Promise<Database> {
  const oldFolder = await initialMigrationOnly(t)
  if (kind === 'pglite') {
    const pglite = await connectPglite()
    t.teardown(() => pglite.database.close())
    await pglite.migrate(oldFolder)
    await fill((query) => pglite.database.db.execute(query))
    await pglite.migrate(migrationsFolder)
    return pglite.database
  }
  const url = await createPostgresDatabase(t)
  const client = postgres(url, { max: 1, onnotice: () => {} })
  await migrate(drizzle({ client }), { migrationsFolder: oldFolder })
  await fill((query) => drizzle({ client }).execute(query))
  await client.end()
  const database = await openDatabase(testConfig({ DATABASE_URL: url }), { persistent: true })
  t.teardown(() => database.close())
  return database
}

const US = '\u001f'

// Names the former rules accepted (3-20 code points, no Cc, unique by lower()), in id order.
const former = ['alice', '\uff41\uff4c\uff49\uff43\uff45', '\uff21lice', 'Jose\u0301', 'JOS\u00c9', '\u039f\u0394\u039f\u03a3', 'e\u0301x', '\u0130stanbul', 'bob']

for (const kind of testDatabases()) {
  t.test(`migrating existing users to username_key on ${kind}`, async (t) => {
    const hash = await argon2.hash('Secreto123', { type: argon2.argon2id, memoryCost: 256, timeCost: 1, parallelism: 1 })
    const database = await migratedAfter(t, kind, async (run) => {
      for (const [i, name] of former.entries()) {
        await run(sql`insert into users (username, email, password_hash) values (${name}, ${`old${i + 1}@example.com`}, ${hash})`)
      }
    })

    const rows = rowsOf(await database.db.execute(sql`select id, username, username_key as key from users order by id`))
    t.strictSame(rows, [
      { id: 1, username: 'alice', key: 'alice' },
      { id: 2, username: '\uff41\uff4c\uff49\uff43\uff45', key: `alice${US}2` },
      { id: 3, username: '\uff21lice', key: `alice${US}3` },
      { id: 4, username: 'Jos\u00e9', key: 'jos\u00e9' },
      { id: 5, username: 'JOS\u00c9', key: `jos\u00e9${US}5` },
      { id: 6, username: '\u039f\u0394\u039f\u03a3', key: '\u03bf\u03b4\u03bf\u03c2' },
      { id: 7, username: 'e\u0301x', key: '\u00e9x' },
      { id: 8, username: '\u0130stanbul', key: 'i\u0307stanbul' },
      { id: 9, username: 'bob', key: 'bob' }
    ], 'NFC where the length rule allows it; the oldest keeps a shared key, later ones get U+001F and their id')
    for (const row of rows.filter((r) => !String(r.key).includes(US))) {
      t.equal(row.key, usernameKey(String(row.username)), `the migration's key for ${row.username} is the service's`)
    }

    const app = await buildCheckedApp(testConfig(), { database, seed: false })
    t.teardown(() => app.close())
    const signup = (username: string, email: string) => app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email, password: 'Secreto123' } })
    for (const [name, i] of [['ALICE', 10], ['jos\u00e9', 11], ['\u03bf\u03b4\u03bf\u03c2', 12], ['BOB', 13]] as const) {
      const taken = await signup(name, `new${i}@example.com`)
      t.equal(taken.statusCode, 409, name)
      t.strictSame(taken.json(), { username: 'El username ya está en uso' }, name)
    }
    const later = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'old2@example.com', password: 'Secreto123' } })
    assertLoggedIn(t, later, { id: 2, username: '\uff41\uff4c\uff49\uff43\uff45', email: 'old2@example.com' }, 'an account whose key was suffixed still logs in by e-mail')

    t.test('a writer of the previous release (no username_key) gets ICU\'s key, and the constraint still holds', async (t) => {
      await database.db.execute(sql`insert into users (username, email, password_hash) values ('Carol', 'carol@example.com', ${hash})`)
      const [carol] = rowsOf(await database.db.execute(sql`select username_key as key from users where email = 'carol@example.com'`))
      t.strictSame(carol, { key: 'carol' })
      const twin = await database.db.execute(sql`insert into users (username, email, password_hash) values ('CAROL', 'carol2@example.com', ${hash})`).then(() => undefined, (e: { cause?: { code?: string } }) => e.cause?.code)
      t.equal(twin, '23505')
    })

    t.test('the service sends its own key: without the fallback trigger, sign-ups work the same', async (t) => {
      await database.db.execute(sql`drop trigger users_username_key_fallback on users`)
      await assertSignedUp(t, app, await signup('\uff24\uff41\uff56\uff45', 'dave@example.com'), { username: '\uff24\uff41\uff56\uff45', email: 'dave@example.com' })
      const [dave] = rowsOf(await database.db.execute(sql`select username_key as key from users where email = 'dave@example.com'`))
      t.strictSame(dave, { key: 'dave' })
      const twin = await signup('DAVE', 'dave2@example.com')
      t.equal(twin.statusCode, 409)
      t.strictSame(twin.json(), { username: 'El username ya está en uso' })
    })
  })
}
