import t from 'tap'
import { sql } from 'drizzle-orm'
import { buildApp } from '../../src/app.js'
import { connectPostgres } from '../../src/db/client.js'
import { databaseUnavailable } from '../../src/db/errors.js'
import { createPostgresDatabase, testConfig } from '../helper.js'
import { migratePostgresDatabase } from '../../src/db/migrate.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: pool timeouts are PostgreSQL-only'

const rowsOf = (result: unknown) => result as Record<string, string>[]

t.test('every PostgreSQL session gets the timeouts of CONTRACT §7', { skip }, async (t) => {
  const url = await createPostgresDatabase(t)
  const database = connectPostgres({ url, poolMax: 2 })
  t.teardown(() => database.close())
  const [row] = rowsOf(await database.db.execute(sql`select current_setting('statement_timeout') as statement, current_setting('idle_in_transaction_session_timeout') as idle`))
  t.strictSame(row, { statement: '5s', idle: '10s' })
})

t.test('a query that waits over 1 s for a connection fails with UMS_DB_ACQUIRE_TIMEOUT, and the pool goes on', { skip }, async (t) => {
  const url = await createPostgresDatabase(t)
  const database = connectPostgres({ url, poolMax: 1 })
  t.teardown(() => database.close())
  // Drizzle queries are lazy: resolving one sends it.
  const slow = Promise.resolve(database.db.execute(sql`select pg_sleep(1.6)`))
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.strictSame(database.poolStats(), { max: 1, inFlight: 1, waiting: 0, acquireTimeouts: 0 })

  const started = Date.now()
  const error = await database.db.execute(sql`select 1`).then(() => undefined, (e: unknown) => e)
  const waited = Date.now() - started
  t.ok(waited >= 950 && waited < 1400, `refused after ${waited} ms`)
  t.equal((error as { cause?: { code?: string } })?.cause?.code, 'UMS_DB_ACQUIRE_TIMEOUT')
  t.ok(databaseUnavailable(error), 'the error handler answers it with 503')
  t.strictSame(database.poolStats(), { max: 1, inFlight: 1, waiting: 0, acquireTimeouts: 1 })

  await slow
  const [row] = rowsOf(await database.db.execute(sql`select 2 as answer`))
  t.strictSame(row, { answer: 2 }, 'the connection serves the next query: the refused one was never sent')
  t.strictSame(database.poolStats(), { max: 1, inFlight: 0, waiting: 0, acquireTimeouts: 1 })
})

t.test('a request that cannot get a connection answers 503 Servicio no disponible with Retry-After', { skip }, async (t) => {
  const url = await createPostgresDatabase(t)
  await migratePostgresDatabase(url)
  const database = connectPostgres({ url, poolMax: 1 })
  t.teardown(() => database.close())
  const app = await buildApp(testConfig(), { database, seed: false })
  t.teardown(() => app.close())
  // Drizzle queries are lazy: resolving one sends it.
  const slow = Promise.resolve(database.db.execute(sql`select pg_sleep(1.6)`))
  await new Promise((resolve) => setTimeout(resolve, 50))
  const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nadie@example.com', password: 'Secreto123' } })
  t.equal(response.statusCode, 503)
  t.equal(response.headers['retry-after'], '1')
  t.strictSame(response.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' })
  await slow
})
