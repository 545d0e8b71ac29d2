import postgres from 'postgres'
import t, { type Test } from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'
import { createConnector } from '../../src/db/connector.js'
import { copyOut, failWaiting, onConnection, type PendingQuery } from '../../src/db/postgres-internals.js'
import { clientOptions } from '../../src/db/postgres-options.js'

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
  connector.dropLastAnswered()
  const [{ pid: next }] = await sql`select pg_backend_pid() as pid`
  t.not(next, pid, 'the next query ran on a new connection, and did not fail')
})
