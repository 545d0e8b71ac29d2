import postgres from 'postgres'
import t from 'tap'
import { migrationTags } from '../../src/db/migrate.js'
import { createPostgresDatabase } from '../helper.js'
import { runCli } from '../support/cli-process.js'
import { productionApp } from '../support/production-app.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: migrations need PostgreSQL'

// CONTRACT §1-§2: with MIGRATIONS=off the instance starts on whatever schema is there and stays
// not ready until an operator's `npm run cli -- migrate` brings the database to head.
t.test('MIGRATIONS=off: not ready on an empty database; npm run cli -- migrate says what it applied, then ready', { skip }, async (t) => {
  t.setTimeout(120_000)
  const url = await createPostgresDatabase(t)
  const { app, management } = await productionApp(t, url, { MIGRATIONS: 'off' })
  const before = await management.inject('/health/ready')
  t.strictSame([before.statusCode, before.json()], [503, { status: 'down', database: 'up', migrations: 'down' }])
  // A request that reaches it anyway meets a schema behind the code: unavailable (503), not a 500.
  const account = { username: 'early', email: 'early@example.com', password: 'Secreto123' }
  const early = await app.inject({ method: 'POST', url: '/auth/signup', payload: account })
  t.strictSame([early.statusCode, early.headers['retry-after'], early.json()], [503, '1', { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }])

  const tags = migrationTags()
  const first = await runCli(['migrate'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused', DATABASE_MIGRATION_URL: url, LOG_LEVEL: 'silent' })
  t.strictSame(first, { code: 0, stdout: `Applied ${tags.join(', ')}: the database is at head (${tags.length} migrations).\n`, stderr: '' }, 'DATABASE_MIGRATION_URL is where it migrates')
  const again = await runCli(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' })
  t.strictSame(again, { code: 0, stdout: `Nothing to apply: the database is at head (${tags.length} migrations).\n`, stderr: '' })

  const after = await management.inject('/health/ready')
  t.strictSame([after.statusCode, after.json()], [200, { status: 'up', database: 'up' }])
  const signedUp = await app.inject({ method: 'POST', url: '/auth/signup', payload: account })
  t.strictSame([signedUp.statusCode, signedUp.json()], [201, { id: 1, username: 'early', email: 'early@example.com' }], 'the same sign-up, once migrated')
})

// A database a newer release migrated: it said "at head", naming this release's count only.
t.test('npm run cli -- migrate on a database a newer release migrated says it is ahead, and applies nothing', { skip }, async (t) => {
  t.setTimeout(120_000)
  const url = await createPostgresDatabase(t)
  const tags = migrationTags()
  t.equal((await runCli(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' })).code, 0)
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end({ timeout: 1 }))
  await admin`insert into drizzle.__drizzle_migrations (hash, created_at) values ('newer', ${Date.now()})`
  const ahead = await runCli(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' })
  t.strictSame(ahead, { code: 0, stdout: `Nothing to apply: the database holds ${tags.length + 1} migrations, this release knows ${tags.length}: a newer release migrated it.\n`, stderr: '' })
})
