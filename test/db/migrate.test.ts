import { connect, createServer, type AddressInfo } from 'node:net'
import postgres from 'postgres'
import t from 'tap'
import { migratePostgresDatabase, migrationTags } from '../../src/db/migrate.js'
import { createPostgresDatabase } from '../helper.js'
import { createPrimary, pgServersSkip, startPgBouncer } from '../support/pg-servers.js'
import { until } from '../deploy/processes.js'

// The migrator's advisory lock (src/db/migrate.ts), on real servers (CONTRACT §2: instances
// starting at once, also through a transaction pooler).
const MIGRATION_LOCK_KEY = 727001
const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: migrations need PostgreSQL'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A client of the test's own that holds `statement` in an open transaction until `release()`. */
async function holding (url: string, statement: string) {
  const client = postgres(url, { max: 1, onnotice: () => {} })
  const reserved = await client.reserve()
  // Its own session is exempt from the database's defaults the tests set.
  await reserved.unsafe('set statement_timeout = 0; set idle_in_transaction_session_timeout = 0; begin')
  await reserved.unsafe(statement)
  return {
    async release (end: 'commit' | 'rollback' = 'commit') { await reserved.unsafe(end); reserved.release(); await client.end({ timeout: 1 }) }
  }
}

const appliedRecords = async (url: string) => {
  const client = postgres(url, { max: 1, onnotice: () => {}, connection: { statement_timeout: 2_147_483_647 } })
  try {
    const [{ exists }] = await client`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`
    return exists ? (await client`select count(*)::int as n from drizzle.__drizzle_migrations`)[0].n : 0
  } finally { await client.end() }
}

// Through PgBouncer, a migrator that waited inside pg_advisory_xact_lock held a server
// connection all along, while the lock's holder needed a second one for Drizzle's migrator: as
// many waiters as the pool has connections, and none of them ever finished.
t.test('three migrators through a transaction pooler of two server connections all finish, one applying', { skip: pgServersSkip(['pgbouncer']) }, async (t) => {
  t.setTimeout(120_000)
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary, { defaultPoolSize: 2 })
  // Held directly on the server, so that all three find it taken and wait together.
  const lock = await holding(primary.url(), `select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`)
  let waiting = 0
  const runs = [0, 1, 2].map(() => migratePostgresDatabase(bouncer.url('postgres'), { onWaiting: () => { waiting++ } }))
  await until('three migrators waiting', async () => waiting === 3)
  await lock.release()
  const applied = await Promise.race([Promise.all(runs), sleep(60_000).then(() => 'still waiting after 60 s')])
  t.strictSame(Array.isArray(applied) ? applied.map(({ applied }) => applied.length).sort() : applied, [0, 0, migrationTags().length])
  t.equal(await appliedRecords(primary.url()), migrationTags().length)
})

// A database's own defaults (a hardening common on managed servers) cut the migrations short:
// statement_timeout cancelled a statement waiting on a lock, idle_in_transaction_session_timeout
// closed the lock's transaction while Drizzle's migrator worked on the other connection.
t.test('migrations run to the end past the database\'s statement_timeout and idle_in_transaction_session_timeout', { skip }, async (t) => {
  t.setTimeout(60_000)
  const url = await createPostgresDatabase(t)
  const name = new URL(url).pathname.slice(1)
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end({ timeout: 1 }))
  await admin.unsafe(`alter database ${name} set statement_timeout = '300ms'; alter database ${name} set idle_in_transaction_session_timeout = '500ms'`)
  // Drizzle's table exists and is locked for 1.5 s: the migrator's first read of it waits that long.
  await admin.unsafe('create schema drizzle; create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)')
  const table = await holding(url, 'lock table drizzle.__drizzle_migrations in access exclusive mode')
  setTimeout(() => { table.release().catch(() => {}) }, 1500)
  const outcome = await migratePostgresDatabase(url).then(({ applied }) => applied.length, (error: Error) => `${error.name}: ${error.message}`)
  t.strictSame(outcome, migrationTags().length)
  t.equal(await appliedRecords(url), migrationTags().length)
})

// The lock is only as good as its connection: lost while Drizzle's migrator worked on the other,
// the migrator failed, but its migrations went on for up to 5 s (the client's end) and committed,
// while another instance could take the lock and migrate too.
t.test('a migrator whose lock\'s connection is lost fails, and commits nothing', { skip }, async (t) => {
  t.setTimeout(60_000)
  const url = await createPostgresDatabase(t)
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end({ timeout: 1 }))
  // A table of that name, not yet committed: the first migration's CREATE TABLE waits for it,
  // inside the migrations' transaction, and goes on when it is rolled back.
  const table = await holding(url, 'create table users (x int)')
  const run = migratePostgresDatabase(url).then(({ applied }) => applied.length, (error: Error) => error.name)
  const lockHolder = async () => (await admin`select pid from pg_locks where locktype = 'advisory' and objid = ${MIGRATION_LOCK_KEY} and granted`)[0]?.pid as number | undefined
  const creating = async () => (await admin`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like 'CREATE TABLE "users"%'`)[0].n === 1
  await until('the migrations waiting inside their transaction', creating)
  await admin`select pg_terminate_backend(${(await lockHolder())!})`
  await sleep(300)
  await table.release('rollback')
  t.not(await run, migrationTags().length, 'the migrator says it failed')
  // The other connection's statements, had they gone on, would be done by now.
  await sleep(2000)
  t.equal(await appliedRecords(url), 0, 'nothing committed')
})

// Lost while the migrator's second connection was still being made: nothing closed that one
// once made, and `npm run cli -- migrate` never exited after saying it had failed.
t.test('a migrator whose lock is lost while its second connection opens closes that one too', { skip }, async (t) => {
  t.setTimeout(60_000)
  const url = new URL(await createPostgresDatabase(t))
  const database = url.pathname.slice(1)
  // The first connection (the lock's) goes through at once, every later one 2 s late.
  let accepted = 0
  const proxy = createServer((client) => {
    client.on('error', () => {})
    setTimeout(() => {
      const upstream = connect(Number(url.port), url.hostname)
      upstream.on('error', () => client.destroy())
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
      client.pipe(upstream).pipe(client)
    }, accepted++ === 0 ? 0 : 2000)
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => proxy.close(() => resolve())))
  const through = new URL(url)
  through.host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`
  const admin = postgres(url.toString(), { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end({ timeout: 1 }))
  const run = migratePostgresDatabase(through.toString()).then(() => 'applied', (error: Error) => error.name)
  const lockHolder = async () => (await admin`select pid from pg_locks where locktype = 'advisory' and objid = ${MIGRATION_LOCK_KEY} and granted`)[0]?.pid as number | undefined
  await until('the migrator holding its lock', async () => await lockHolder() !== undefined)
  await admin`select pg_terminate_backend(${(await lockHolder())!})`
  t.not(await run, 'applied')
  await sleep(3500)
  t.strictSame([...await admin`select application_name, state from pg_stat_activity where datname = ${database} and pid <> pg_backend_pid()`], [], 'no connection of the migrator left')
})

// postgres.js's `primary` check passes a primary set read-only (CONTRACT §2's demoted primary):
// listed first, it failed every start and CLI run with 25006, although libpq's `read-write`
// moves on to the next host.
t.test('a read-only server listed first: migrations go to the host that takes writes; read-only and at head, nothing to do', { skip: pgServersSkip() }, async (t) => {
  const [first, second] = [await createPrimary(t), await createPrimary(t)]
  await Promise.all([first.createDatabase('ums'), second.createDatabase('ums')])
  await first.query('alter system set default_transaction_read_only = on')
  await first.query('select pg_reload_conf()')
  const both = `postgres://postgres@127.0.0.1:${first.port},127.0.0.1:${second.port}/ums?target_session_attrs=read-write`
  t.strictSame(await migratePostgresDatabase(both), { applied: migrationTags(), recorded: migrationTags().length })
  const recordedOn = async (server: typeof first) => {
    const sql = postgres(server.url('ums'), { max: 1, onnotice: () => {} })
    try { return (await sql`select to_regclass('drizzle.__drizzle_migrations') is not null as migrated`)[0].migrated } finally { await sql.end() }
  }
  t.strictSame([await recordedOn(first), await recordedOn(second)], [false, true], 'written on the second host only')

  await t.rejects(migratePostgresDatabase(first.url('ums')), {
    name: 'ReadOnlyDatabaseError',
    code: 'UMS_DB_READ_ONLY',
    message: 'migrations are pending and the server does not take writes (transaction_read_only is on: a demoted primary, or default_transaction_read_only set)'
  }, 'alone and pending, it says why')

  // At head, a start needs no write: the server that refuses them for a while still serves reads.
  await second.query('alter system set default_transaction_read_only = on')
  await second.query('select pg_reload_conf()')
  t.strictSame(await migratePostgresDatabase(second.url('ums')), { applied: [], recorded: migrationTags().length })
})
