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
  const { management } = await productionApp(t, url, { MIGRATIONS: 'off' })
  const before = await management.inject('/health/ready')
  t.strictSame([before.statusCode, before.json()], [503, { status: 'down', database: 'up', migrations: 'down' }])

  const tags = migrationTags()
  const first = await runCli(['migrate'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused', DATABASE_MIGRATION_URL: url, LOG_LEVEL: 'silent' })
  t.strictSame(first, { code: 0, stdout: `Applied ${tags.join(', ')}: the database is at head (${tags.length} migrations).\n`, stderr: '' }, 'DATABASE_MIGRATION_URL is where it migrates')
  const again = await runCli(['migrate'], { DATABASE_URL: url, LOG_LEVEL: 'silent' })
  t.strictSame(again, { code: 0, stdout: `Nothing to apply: the database is at head (${tags.length} migrations).\n`, stderr: '' })

  const after = await management.inject('/health/ready')
  t.strictSame([after.statusCode, after.json()], [200, { status: 'up', database: 'up' }])
})
