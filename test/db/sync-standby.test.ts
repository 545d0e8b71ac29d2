import t from 'tap'
import { until } from '../deploy/processes.js'
import { assertSignedUp, errorBodies } from '../helper.js'
import { createPrimary, createStandby, pgServersSkip, startPgBouncer, type PgServer } from '../support/pg-servers.js'
import { productionApp } from '../support/production-app.js'

t.setTimeout(300_000)

const waitingForStandby = async (primary: PgServer) => (await primary.query("select count(*)::int as n from pg_stat_activity where wait_event = 'SyncRep'"))[0].n

// statement_timeout does not bound a commit waiting for a synchronous standby: the answer
// deadline answers the request, and a cancel ends the backend's wait (src/db/postgres.ts).
t.test('commits waiting for a synchronous standby that is gone: 503 within the answer deadline, and no backend left waiting', { skip: pgServersSkip() }, async (t) => {
  const primary = await createPrimary(t)
  const { app } = await productionApp(t, primary.url())
  await primary.query("alter system set synchronous_standby_names = 'gone'")
  await primary.query('select pg_reload_conf()')
  const waiting = async () => await waitingForStandby(primary)
  const started = Date.now()
  const answers = await Promise.all(['sync1', 'sync2'].map((username) =>
    app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })))
  const ms = Date.now() - started
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), answers.map(() => [503, errorBodies.unavailable]))
  t.ok(ms < 7500, `answered after ${ms} ms`)
  await until('no backend waits for the standby', async () => await waiting() === 0, 5000)
  t.equal(await waiting(), 0)
})

// Behind a transaction pooler every statement runs in a transaction of its own on a reserved
// connection (src/db/transactions.ts): its COMMIT waits for the standby just the same, and a
// client that gives up only makes PgBouncer close the server connection, which the backend
// waiting for the standby does not notice.
t.test('through PgBouncer in transaction mode, a synchronous standby stopped: 503 each, no backend left waiting, the pool whole after', { skip: pgServersSkip(['pgbouncer']) }, async (t) => {
  const primary = await createPrimary(t)
  const standby = await createStandby(t, primary)
  const bouncer = await startPgBouncer(t, primary)
  const { app, log } = await productionApp(t, bouncer.url('postgres'), { DB_POOL_MAX: '3' })
  const signup = (username: string) => app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })
  await assertSignedUp(t, app, await signup('before'), { username: 'before', email: 'before@example.com' }, 'a sign-up while the standby streams')
  await standby.stop()
  const answers = await Promise.all(['stall1', 'stall2', 'stall3'].map(signup))
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), answers.map(() => [503, errorBodies.unavailable]))
  await until('no backend waits for the standby', async () => await waitingForStandby(primary) === 0, 5000).catch(() => {})
  t.equal(await waitingForStandby(primary), 0, 'no backend waits for the standby')
  // A cancelled wait commits locally, unreplicated: the rows are there, and were answered 503.
  t.strictSame(await primary.query("select username from users where username like 'stall%' order by username"),
    [{ username: 'stall1' }, { username: 'stall2' }, { username: 'stall3' }], 'committed locally, never acknowledged')
  // Each wait ended by the sweep's CancelRequest, which PgBouncer forwarded to that backend;
  // not by the answer deadline, after which PgBouncer closes the server connection and the wait goes on.
  t.strictSame(log.lines.filter((l) => l.msg === 'service unavailable').map((l) => l.cause?.cause?.type),
    ['StatementCancelledError', 'StatementCancelledError', 'StatementCancelledError'], 'failed as cancelled, whatever the server answered')
  t.equal(primary.logs().match(/WARNING: {2}canceling wait for synchronous replication due to user request/g)?.length, 3, 'the primary cancelled three waits')
  await primary.query("alter system set synchronous_standby_names = ''")
  await primary.query('select pg_reload_conf()')
  const after = await Promise.all(['after1', 'after2', 'after3'].map(signup))
  const stored = await primary.query("select id, username, email from users where username like 'after%' order by username")
  t.strictSame(after.map((a) => [a.statusCode, a.json()]), stored.map((row) => [201, row]), 'every connection of the pool works, each answer its stored row')
  t.strictSame(stored.map((row) => row.username), ['after1', 'after2', 'after3'])
})

// A cancel goes to the host its statement's connection is on. postgres.js opens the cancel's
// socket through the connector like a new connection, which took the next host in turn: with a
// standby listed first, half the cancels reached the standby, which ignores them, and those
// backends waited for good.
t.test('a standby listed first: each commit waiting for a synchronous standby that is gone is cancelled on the primary', { skip: pgServersSkip() }, async (t) => {
  const primary = await createPrimary(t)
  const standby = await createStandby(t, primary, { synchronous: false })
  const { app } = await productionApp(t, `postgres://postgres@127.0.0.1:${standby.port},127.0.0.1:${primary.port}/postgres?target_session_attrs=read-write`, { DB_POOL_MAX: '4' })
  await primary.query("alter system set synchronous_standby_names = 'gone'")
  await primary.query('select pg_reload_conf()')
  const answers = await Promise.all(['cancel1', 'cancel2', 'cancel3', 'cancel4'].map((username) =>
    app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })))
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), answers.map(() => [503, errorBodies.unavailable]))
  await until('no backend waits for the standby', async () => await waitingForStandby(primary) === 0, 5000).catch(() => {})
  t.equal(await waitingForStandby(primary), 0, 'no backend waits for the standby')
  t.equal(primary.logs().match(/WARNING: {2}canceling wait for synchronous replication due to user request/g)?.length, 4, 'the primary cancelled four waits')
})
