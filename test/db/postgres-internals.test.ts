import { createServer, type AddressInfo, type Socket } from 'node:net'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'
import { createConnector } from '../../src/db/connector.js'
import { assertDriverPatched, cancelRunning, closeAtOnce, copyOut, failWaiting, onConnection, sameConnection, type PendingQuery } from '../../src/db/postgres-internals.js'
import { clientOptions } from '../../src/db/postgres-options.js'
import { int32s, message } from '../support/protocol-messages.js'

// Canaries for src/db/postgres-internals.ts: each fails when a postgres.js upgrade changes what
// the service relies on beyond its documented API. (A factory socket that fails before the
// startup message is written is covered by test/db/outage.test.ts's refused connections.)
const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the canaries need PostgreSQL'

function client (t: Test, max = 1) {
  const target = parseDatabaseUrl(process.env.TEST_DATABASE_URL!)
  const connector = createConnector(target, { connectTimeoutMs: 1000, answerDeadlineMs: 6000 })
  const sql = postgres({ ...clientOptions(target, connector), max, ...{ max_pipeline: 0 } as object })
  t.teardown(async () => { connector.stop(); await sql.end({ timeout: 1 }) })
  return { sql, connector }
}

t.test('a waiting query has no state until a connection takes it, and failWaiting takes it out of the queue', { skip }, async (t) => {
  const { sql } = client(t)
  const busy = sql.unsafe('select pg_sleep(0.3)') as unknown as PendingQuery
  // A query runs once something waits for it.
  const done = busy.then(() => 'answered')
  const waiting = sql.unsafe('select 1 as one') as unknown as PendingQuery
  const failed = waiting.then(() => 'answered', (error: Error) => error.message)
  // The busy query holds the pool's one connection for 0.3 s once it is connected, and connecting
  // has no fixed duration on a loaded machine: wait until the connection has it.
  for (const deadline = Date.now() + 3000; !onConnection(busy) && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 5))
  t.strictSame([onConnection(busy), onConnection(waiting)], [true, false])
  failWaiting(waiting, new Error('ours'))
  t.equal(await failed, 'ours', 'rejected with the error given')
  t.equal(await done, 'answered')
  t.strictSame([...await sql.unsafe('select 2 as two')], [{ two: 2 }], 'the pool goes on')
})

t.test('a running query\'s state is its connection\'s backend key: cancelRunning with the connector\'s cancel stops it on its server', { skip }, async (t) => {
  const { sql, connector } = client(t)
  const [{ pid }] = await sql`select pg_backend_pid() as pid`
  const sleeping = sql.unsafe('select pg_sleep(3)') as unknown as PendingQuery
  const failed = sleeping.then(() => 'answered', (error: { code?: string }) => error.code)
  for (const deadline = Date.now() + 3000; !onConnection(sleeping) && Date.now() < deadline;) await new Promise((resolve) => setTimeout(resolve, 5))
  t.strictSame(onConnection(sleeping) && [sleeping.state.pid, typeof sleeping.state.secret], [pid, 'number'], 'the pid of the connection it runs on')
  const started = Date.now()
  if (onConnection(sleeping)) cancelRunning(sleeping, (rejection) => rejection, connector.cancel)
  t.equal(await failed, '57014', 'cancelled by the server: canceling statement due to user request')
  t.ok(Date.now() - started < 2000, `within ${Date.now() - started} ms, not after the 3 s sleep`)
  t.equal(await connector.cancel({ pid: 0, secret: 0 }), false, 'a key no connection of ours has: nothing sent')
})

t.test('COPY … TO STDOUT: each row handed over as one CopyData message', { skip }, async (t) => {
  const { sql } = client(t)
  const rows: string[] = []
  await copyOut(sql.unsafe('copy (select n, \'x\' || n from generate_series(1, 3) n) to stdout') as unknown as PendingQuery, (bytes) => rows.push(bytes.toString()))
  t.strictSame(rows, ['1\tx1\n', '2\tx2\n', '3\tx3\n'])
  t.strictSame([...await sql`select 1 as one`], [{ one: 1 }], 'the connection serves the next query')
})

t.test('a connection closed at once after an answer is not handed to the next query', { skip }, async (t) => {
  const { sql, connector } = client(t)
  const [{ pid }] = await sql`select pg_backend_pid() as pid`
  connector.refusedWrite()()
  const [{ pid: next }] = await sql`select pg_backend_pid() as pid`
  t.not(next, pid, 'the next query ran on a new connection, and did not fail')
})

// src/db/postgres.ts closes a connection whose server refused a write once no query is on it: one
// may already be, handed to it as the refusal settled.
t.test('a connection that settles a query has the next waiting one before any reaction to it runs: sameConnection tells', { skip }, async (t) => {
  const { sql, connector } = client(t)
  await sql`select 1`
  const failing = sql.unsafe('select 1/0') as unknown as PendingQuery
  const seen = failing.then(() => 'answered', () => [onConnection(waiting), sameConnection(waiting, failing)])
  const waiting = sql.unsafe('select 2 as two') as unknown as PendingQuery
  const answered = waiting.then((rows) => [...rows as unknown[]])
  t.strictSame(await seen, [true, true], 'a failed query\'s rejection: the next is on its connection')
  t.strictSame(await answered, [{ two: 2 }])
  // A query is asked for once something waits for it.
  const next = sql.unsafe('select 3 as three') as unknown as PendingQuery
  const seenNext = next.then(() => [onConnection(last), sameConnection(last, next)])
  const last = sql.unsafe('select 4 as four') as unknown as PendingQuery
  const lastAnswered = last.then(() => 'answered')
  t.strictSame(await seenNext, [true, true], 'an answered one\'s too')
  t.equal(await lastAnswered, 'answered')
  connector.refusedWrite()()
  const reopened = sql.unsafe('select 5') as unknown as PendingQuery
  await reopened
  t.ok(sameConnection(reopened, last), 'the same after the connection opens anew')

  const { sql: two } = client(t, 2)
  const [a, b] = ['select pg_sleep(0.2)', 'select pg_sleep(0.2)'].map((q) => two.unsafe(q) as unknown as PendingQuery)
  await Promise.all([a, b])
  t.strictSame([sameConnection(a, b), sameConnection(a, a)], [false, true], 'queries run at once are on two connections')
  const waitingOne = two.unsafe('select 1') as unknown as PendingQuery
  t.equal(sameConnection(a, waitingOne), false, 'a query no connection took yet is on none')
  await waitingOne
})

// patches/postgres+3.4.9.patch: the four faults of postgres.js 3.4.9 it mends, each shown here.

t.test('a reserved connection whose server went away fails its next statements instead of the process (porsager/postgres#1208)', { skip }, async (t) => {
  // As in the issue: a plain client. (With the service's max_pipeline 0, a statement issued between
  // the socket's error and its close would wait in the reservation's own queue for good:
  // src/db/transactions.ts issues none after a connection's failure.)
  const sql = postgres(process.env.TEST_DATABASE_URL!, { max: 2, onnotice: () => {} })
  const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => Promise.all([sql.end({ timeout: 1 }), admin.end()]))
  const reserved = await sql.reserve()
  const [{ pid }] = await reserved`select pg_backend_pid() as pid`
  await admin`select pg_terminate_backend(${pid})`
  // The first may meet the reset itself (ECONNRESET) or the server's reason as it closed (57P01,
  // terminating connection due to administrator command); both fail, neither waits for good.
  const outcomes = []
  for (let i = 0; i < 2; i++) {
    const settled = reserved`select 1`.then(() => 'answered', (error) => ['CONNECTION_CLOSED', 'ECONNRESET', '57P01'].includes(error.code) ? 'connection lost' : error.code)
    outcomes.push(await Promise.race([settled, new Promise((resolve) => setTimeout(() => resolve('no answer within 3 s'), 3000))]))
  }
  t.strictSame(outcomes, ['connection lost', 'connection lost'])
})

t.test('a write pending when its connection closes goes with it: the connection opens anew and answers', { skip }, async (t) => {
  const { sql, connector } = client(t)
  await sql`select 1`
  const socket = connector.lastAnswered()!
  const lost = (sql.unsafe('select 2') as unknown as PendingQuery & { execute (): unknown })
  const settled = lost.then(() => 'answered', (error) => error.code)
  lost.execute()
  // postgres.js sends it from an immediate of its own, queued after this one.
  setImmediate(() => closeAtOnce(socket))
  t.equal(await settled, 'CONNECTION_CLOSED')
  const next = await Promise.race([sql`select 3 as n`.then((rows) => [...rows]), new Promise((resolve) => setTimeout(() => resolve('no answer within 3 s'), 3000))])
  t.strictSame(next, [{ n: 3 }], 'nothing of the lost write is sent before the next startup message')
})

t.test('with several hosts, a connection\'s first query fails when its server goes away, and leaves nothing to the next one', { skip }, async (t) => {
  const url = new URL(process.env.TEST_DATABASE_URL!)
  const target = parseDatabaseUrl(`${url.protocol}//${url.username}@${url.host},${url.host}${url.pathname}`)
  const connector = createConnector(target, { connectTimeoutMs: 1000, answerDeadlineMs: 6000 })
  const applicationName = `ums-canary-${process.pid}-${Date.now()}`
  const sql = postgres({ ...clientOptions(target, connector, { applicationName }), max: 1, ...{ max_pipeline: 0 } as object })
  t.teardown(async () => { connector.stop(); await sql.end({ timeout: 1 }) })
  const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  const first = sql`select pg_sleep(5)`.then(() => 'answered', (error) => error.code)
  for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
    if ((await admin`select 1 from pg_stat_activity where application_name = ${applicationName} and query like 'select pg_sleep%'`).length > 0) break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${applicationName}`
  const outcome = await Promise.race([first, new Promise((resolve) => setTimeout(() => resolve('still waiting after 2 s'), 2000))])
  // The server says why as it closes (terminating connection due to administrator command).
  t.equal(outcome, '57P01', 'failed with the server\'s reason, not kept for the next host')
  const next = await Promise.race([sql`select 42 as n`.then((rows) => [...rows], (error) => `${error.code} ${error.message}`), new Promise((resolve) => setTimeout(() => resolve('no answer within 3 s'), 3000))])
  t.strictSame(next, [{ n: 42 }], 'the next query gets its own answer, not the lost one\'s error or rows')
})

// The acquire sweep fails a query that waited past its second, and the query a closed connection
// reopens for is the oldest waiting one: over TLS or a slow link, one the sweep fails before its
// connection is ready. postgres.js then left that connection out of the pool for good, so under
// steady load the pool never served again after a fail-over (an outside audit's finding).
t.test('a connection whose first query failed while it was connecting joins the pool once ready and answers the next', { skip }, async (t) => {
  const target = parseDatabaseUrl(process.env.TEST_DATABASE_URL!)
  const connector = createConnector(target, { connectTimeoutMs: 1000, answerDeadlineMs: 6000 })
  // A link slow to open: each connection starts 300 ms late.
  const slowOpen = async () => {
    await new Promise((resolve) => setTimeout(resolve, 300))
    return await connector.open()
  }
  const sql = postgres({ ...clientOptions(target, connector), max: 1, ...{ max_pipeline: 0, socket: slowOpen } as object })
  t.teardown(async () => { connector.stop(); await sql.end({ timeout: 1 }) })
  const first = sql.unsafe('select 1 as one') as unknown as PendingQuery
  const failed = first.then(() => 'answered', (error: Error) => error.message)
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(onConnection(first), false, 'still connecting')
  failWaiting(first, new Error('acquire timeout'))
  t.equal(await failed, 'acquire timeout')
  const next = await Promise.race([sql.unsafe('select 2 as two').then((rows) => [...rows], (error) => `${error.code} ${error.message}`), new Promise((resolve) => setTimeout(() => resolve('no answer within 3 s'), 3000))])
  t.strictSame(next, [{ two: 2 }], 'the connection serves the next query')
})

/**
 * A server that starts every connection (no TLS, no password), then answers the connection's
 * first message after that with `then`: a pooler that has no server for it, as PgBouncer.
 */
async function startingServer (t: Test, then: (socket: Socket) => void): Promise<number> {
  const server = createServer((socket) => {
    socket.once('data', () => {
      socket.write(Buffer.concat([message('R', int32s(0)), message('K', int32s(7, 8)), message('Z', Buffer.from('I'))]))
      socket.once('data', () => { then(socket) })
    })
    socket.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return (server.address() as AddressInfo).port
}

const fatal = (code: string, text: string) => message('E', Buffer.from(`SFATAL\u0000VFATAL\u0000C${code}\u0000M${text}\u0000\u0000`))

t.test('an error a server sends as it closes fails the query it was running with that error, not a bare CONNECTION_CLOSED', async (t) => {
  const port = await startingServer(t, (socket) => { socket.end(fatal('08P01', 'query_wait_timeout')) })
  const sql = postgres({ host: '127.0.0.1', port, ssl: false, max: 1, fetch_types: false, connect_timeout: 2, onnotice: () => {} })
  t.teardown(() => sql.end({ timeout: 0 }))
  const failure = await sql.unsafe('select 1').then(() => 'answered', (error: { code?: string, message?: string }) => `${error.code} ${error.message}`)
  t.equal(failure, '08P01 query_wait_timeout', 'PgBouncer\'s reason reaches the log')
})

// With several hosts, the log must name the one whose connection closed, not the whole list.
t.test('a connection closed without a word fails its query with CONNECTION_CLOSED naming that host alone', async (t) => {
  const port = await startingServer(t, (socket) => { socket.end() })
  const sql = postgres({ host: `127.0.0.1:${port},127.0.0.1:1`, ssl: false, max: 1, fetch_types: false, connect_timeout: 2, onnotice: () => {} })
  t.teardown(() => sql.end({ timeout: 0 }))
  const failure = await sql.unsafe('select 1').then(() => 'answered', (error: { code?: string, message?: string, address?: unknown, port?: unknown }) => ({ ...error, message: error.message }))
  t.strictSame(failure, { code: 'CONNECTION_CLOSED', errno: 'CONNECTION_CLOSED', address: '127.0.0.1', port, message: `write CONNECTION_CLOSED 127.0.0.1:${port}` })
})

t.test('a connection reset while postgres.js fetches its array types leaves no unhandled rejection', async (t) => {
  const port = await startingServer(t, (socket) => { socket.resetAndDestroy() })
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => { unhandled.push(reason) }
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => { process.off('unhandledRejection', onUnhandled) })
  const sql = postgres({ host: '127.0.0.1', port, ssl: false, max: 1, connect_timeout: 2, onnotice: () => {} })
  const query = sql.unsafe('select 1').then(() => 'answered', (error: { code?: string }) => error.code)
  await new Promise((resolve) => setTimeout(resolve, 300))
  await sql.end({ timeout: 0 })
  t.ok(['ECONNRESET', 'CONNECTION_ENDED', 'CONNECTION_CLOSED', 'CONNECTION_DESTROYED'].includes(await query as string), 'the query fails')
  t.strictSame(unhandled.map((reason) => (reason as { code?: string }).code), [], 'no unhandled rejection')
})

t.test('the service refuses to run on an unpatched postgres.js, saying how to patch it', async (t) => {
  t.doesNotThrow(() => assertDriverPatched(), 'installed by npm ci, patched')
  const unpatched = '  function error(err) {\n    if (connection.queue === queues.connecting && options.host[retries + 1])'
  t.throws(() => assertDriverPatched(unpatched), { message: 'postgres.js is not patched (patches/postgres+3.4.9.patch): install with `npm ci`, which applies it, not with --ignore-scripts; or run `npx patch-package`' })
})
