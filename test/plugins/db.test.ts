import Fastify from 'fastify'
import { sql } from 'drizzle-orm'
import t from 'tap'
import dbPlugin from '../../src/plugins/db.js'
import { createTestDatabase, rowsOf, testConfig } from '../helper.js'

// In the style of fastify/demo's plugin tests: the plugin alone, on a bare instance.
t.test('without a database given, it opens the configured one (development: PGlite) and closes it with the app', async (t) => {
  const app = Fastify()
  await app.register(dbPlugin, { config: testConfig() })
  await app.ready()
  t.equal(app.database.driver, 'pglite')
  t.strictSame(rowsOf(await app.database.db.execute(sql`select 1 as one`)), [{ one: 1 }])
  await app.close()
  await t.rejects(app.database.db.execute(sql`select 1`), { cause: { message: 'PGlite is closed' } }, 'closed with the app')
})

t.test('a database given by the caller is decorated as is, and left open for the caller to close', async (t) => {
  const { database } = await createTestDatabase(t, 'pglite')
  const app = Fastify()
  await app.register(dbPlugin, { config: testConfig(), database })
  await app.ready()
  t.equal(app.database, database)
  await app.close()
  t.strictSame(rowsOf(await database.db.execute(sql`select 2 as two`)), [{ two: 2 }], 'still open')
})
