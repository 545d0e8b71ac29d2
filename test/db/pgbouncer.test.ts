import postgres from 'postgres'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { migrationTags } from '../../src/db/migrate.js'
import { assertLoggedIn, causeChain, errorBodies } from '../helper.js'
import { createPrimary, pgServersSkip, startPgBouncer, type PgServer } from '../support/pg-servers.js'
import { productionApp } from '../support/production-app.js'
import { until } from '../deploy/processes.js'

// PgBouncer 1.18 in transaction mode with its stock settings, made by the test (CONTRACT §2):
// it refuses statement_timeout in the startup packet, and may split a session across servers.
t.setTimeout(300_000)
const skip = pgServersSkip(['pgbouncer'])

const signup = (app: App, username: string) =>
  app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })

t.test('three instances start together through PgBouncer; 30 sign-ups racing six at a time are all 201 and stored', { skip }, async (t) => {
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary)
  // No DATABASE_MIGRATION_URL: all three migrate through the pooler at once.
  const instances = await Promise.all([0, 1, 2].map(() => productionApp(t, bouncer.url('postgres'))))
  t.strictSame(await primary.query('select count(*)::int as applied, count(distinct hash)::int as distinct from drizzle.__drizzle_migrations'),
    [{ applied: migrationTags().length, distinct: migrationTags().length }], 'each migration applied once')
  // Six at a time, two an instance: the statements race through the pooler, while the hash
  // queue (2 s at most behind HASH_CONCURRENCY slots) is not what a slow machine is testing.
  const names = Array.from({ length: 30 }, (_, i) => `pgb${i}`)
  const answers = []
  for (let wave = 0; wave < names.length; wave += 6) {
    answers.push(...await Promise.all(names.slice(wave, wave + 6).map((name, i) => signup(instances[i % 3].app, name))))
  }
  const logged = instances.flatMap(({ log }) => log.lines.filter((line) => line.level >= 40).map(({ msg, cause }) => ({ msg, cause: cause?.type, code: cause?.code })))
  t.strictSame(answers.map((a) => a.statusCode), names.map(() => 201), `warnings and errors logged: ${JSON.stringify(logged)}`)
  const stored = await primary.query('select id, username, email from users order by id')
  t.strictSame(answers.map((a) => a.json()).sort((a, b) => a.id - b.id), stored, 'every answer is the stored row')
  const pgb0 = stored.find((row) => row.username === 'pgb0') as { id: number, username: string, email: string }
  for (const { app } of instances) {
    const token = assertLoggedIn(t, await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'pgb0@example.com', password: 'Secreto123' } }), pgb0)
    const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}` } })
    t.strictSame([me.statusCode, me.json()], [200, { ...pgb0, role: 'ROLE_USER' }])
  }
})

/** A sign-up while another session holds the table locked: answered 503 within 7.5 s, no row after. */
async function blockedSignup (t: Test, primary: PgServer, url: string, expectedCode: string) {
  const { app, log } = await productionApp(t, url)
  const admin = postgres(primary.url('postgres'), { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  const locked = admin.begin(async (tx) => {
    await tx`lock table users in access exclusive mode`
    await new Promise((resolve) => setTimeout(resolve, 8000))
  })
  await new Promise((resolve) => setTimeout(resolve, 300))
  const started = Date.now()
  const answer = await signup(app, 'blocked')
  const waited = Date.now() - started
  t.strictSame([answer.statusCode, answer.json()], [503, errorBodies.unavailable])
  t.ok(waited < 7500, `answered after ${waited} ms`)
  await locked
  t.strictSame(await primary.query('select count(*)::int as rows from users where username = \'blocked\''), [{ rows: 0 }], 'no row once the lock is gone')
  const [line] = log.lines.filter((l) => l.msg === 'service unavailable')
  t.ok(causeChain(line?.cause).some((cause) => cause.code === expectedCode), `the server cancelled it (${expectedCode}): its statement_timeout holds`)
}

t.test('a sign-up blocked by a table lock through PgBouncer: 503 within 7.5 s, cancelled by the server, no row', { skip }, async (t) => {
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary)
  await blockedSignup(t, primary, bouncer.url('postgres'), '57014')
})

t.test('the same on a direct connection', { skip: pgServersSkip() }, async (t) => {
  const primary = await createPrimary(t)
  await blockedSignup(t, primary, primary.url('postgres'), '57014')
})

// A transaction's connection lost behind PgBouncer: postgres.js's rollback there ended the
// process (porsager/postgres#1208, patches/postgres+3.4.9.patch), and a release put the dead
// connection back in the pool (src/db/transactions.ts).
t.test('server connections lost mid-transaction through PgBouncer: 503 each, the process lives, the pool stays whole', { skip }, async (t) => {
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary)
  const { app } = await productionApp(t, bouncer.url('postgres'), { DB_POOL_MAX: '3' })
  const admin = postgres(primary.url('postgres'), { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  const waitingInsert = "from pg_stat_activity where wait_event_type = 'Lock' and query like 'insert%'"
  let lost = 0
  // PgBouncer may hand over a server connection it has not yet found dead: that sign-up fails
  // at once ("server conn crashed?"), with the same 503, and another round follows.
  for (let round = 1; lost < 3 && round <= 6; round++) {
    const locked = admin.begin(async (tx) => {
      await tx`lock table users in access exclusive mode`
      await new Promise((resolve) => setTimeout(resolve, 4000))
    })
    await new Promise((resolve) => setTimeout(resolve, 200))
    let answered = false
    const answer = signup(app, `lost${round}`).finally(() => { answered = true })
    await until('the sign-up waits for the lock, or is answered', async () => answered || (await primary.query(`select 1 ${waitingInsert}`)).length > 0)
    if (!answered && (await primary.query(`select pg_terminate_backend(pid) as ok ${waitingInsert}`)).length === 1) lost++
    const failed = await answer
    t.strictSame([failed.statusCode, failed.json()], [503, errorBodies.unavailable], `round ${round}`)
    await locked
  }
  t.equal(lost, 3, 'three transactions lost their server connection')
  const after = await Promise.all(Array.from({ length: 6 }, (_, i) => signup(app, `after${i}`)))
  t.strictSame(after.map((a) => a.statusCode), [201, 201, 201, 201, 201, 201], `every connection of the pool works: ${after.map((a) => a.body).join(' ')}`)
  t.strictSame(after.map((a) => a.json()), await primary.query("select id, username, email from users where username like 'after%' order by username"), 'each answer is its stored row')
  t.strictSame(await primary.query("select username from users where username like 'lost%'"), [], 'the lost transactions left no row')
})

// PostgreSQL gone behind a running PgBouncer: the pooler still logs clients in (from its cache),
// then closes each connection at its first query with `server login has been failing`. That
// first query is postgres.js's own (the array types), which keeps its failure to itself, so the
// requests waiting for a connection got a bare UMS_DB_ACQUIRE_TIMEOUT: the log named no cause.
t.test('PostgreSQL gone behind PgBouncer: each acquire timeout is logged with what the pooler said', { skip }, async (t) => {
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary)
  const { app, log } = await productionApp(t, bouncer.url('postgres'), { DB_POOL_MAX: '2' })
  t.equal((await signup(app, 'before')).statusCode, 201, 'the pooler has logged in to PostgreSQL once')
  await primary.stop('fast')
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => signup(app, `gone${i}`)))
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), answers.map(() => [503, errorBodies.unavailable]))
  const chains = log.lines.filter((l) => l.msg === 'service unavailable')
    .map((l) => causeChain(l.cause).slice(1).map(({ cause, ...link }) => link))
  const acquireTimeouts = chains.filter((chain) => chain[0]?.code === 'UMS_DB_ACQUIRE_TIMEOUT')
  t.ok(acquireTimeouts.length > 0, `some requests waited for a connection (${acquireTimeouts.length} of ${chains.length} lines)`)
  const pooler = 'server login has been failing, try again later (server_login_retry)'
  t.strictSame(acquireTimeouts, acquireTimeouts.map(() => [
    { type: 'AcquireTimeoutError', message: 'no database connection within 1000 ms', code: 'UMS_DB_ACQUIRE_TIMEOUT' },
    { type: 'StartupRefusedError', message: `127.0.0.1:${bouncer.port} closed the connection at its first query: ${pooler}`, code: '08P01' }
  ]), 'each names the pooler and its words')
})
