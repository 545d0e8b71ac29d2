import { setTimeout as sleep } from 'node:timers/promises'
import { eq } from 'drizzle-orm'
import postgres from 'postgres'
import t from 'tap'
import { users } from '../../src/db/schema.js'
import { assertLoggedIn, assertSignedUp, causeChain, createPostgresDatabase, errorBodies } from '../helper.js'
import { productionApp } from '../support/production-app.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the read-only test needs PostgreSQL'
const UNAVAILABLE = errorBodies.unavailable

// A demoted primary refuses writes (25006) on sessions that stay open: CONTRACT §2 wants a 503
// with Retry-After, reads still served, and writes back within 10 s of the server taking them.
t.test('a server that turns read-only: writes 503 with Retry-After, reads 200, writes back within 10 s', { skip }, async (t) => {
  const url = await createPostgresDatabase(t)
  const name = new URL(url).pathname.slice(1)
  const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  const { app, log } = await productionApp(t, url)
  const signup = (username: string) => app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })
  const account = { username: 'ro.before', email: 'ro.before@example.com' }
  await assertSignedUp(t, app, await signup(account.username), account)
  const [{ id }] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email))
  const token = assertLoggedIn(t, await app.inject({ method: 'POST', url: '/auth/login', payload: { email: account.email, password: 'Secreto123' } }), { ...account, id })

  // Read-only for every session, the pool's open ones included (they reconnect as read-only).
  await admin.unsafe(`alter database ${name} set default_transaction_read_only = on`)
  await admin.unsafe(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`)
  await sleep(200)
  const refused = await signup('ro.during')
  t.equal(refused.statusCode, 503, 'a write is refused with 503, never 500')
  t.equal(refused.headers['retry-after'], '1')
  t.strictSame(refused.json(), UNAVAILABLE)
  const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}` } })
  t.equal(me.statusCode, 200, `reads are still served: ${me.body}`)
  t.strictSame(me.json(), { id, ...account, role: 'ROLE_USER' })

  const [line] = log.lines.filter((l) => l.msg === 'service unavailable')
  // And which server refused: with several hosts, the one an operator must look at (the demoted primary).
  const server = new URL(url)
  t.strictSame(causeChain(line?.cause).slice(1), [{ type: 'PostgresError', message: 'cannot execute INSERT in a read-only transaction', code: '25006', address: server.hostname, port: Number(server.port || 5432) }],
    'the log says why, in the server\'s words, and which server said it')
  t.notMatch(log.text(), /ro\.during@example\.com|\$argon2|Secreto123/, 'no e-mail, hash or password')

  // Writable again: the connection that saw 25006 was dropped, so the next one is a new session.
  await admin.unsafe(`alter database ${name} set default_transaction_read_only = off`)
  const back = Date.now()
  let after, username
  do after = await signup(username = `ro.after${Date.now() % 100000}`)
  while (after.statusCode !== 201 && Date.now() - back < 10_000 && await sleep(200, true))
  await assertSignedUp(t, app, after, { username, email: `${username}@example.com` }, `writes back ${Date.now() - back} ms after the server took them`)
  t.ok(Date.now() - back < 10_000)
})

// postgres.js hands a connection the next waiting query as it settles the refused write, before
// any reaction to the refusal runs: the connection, closed at once there, took that query with it
// (CONNECTION_CLOSED: a read's 503) whenever queries waited for the pool (a load of 8 clients on a
// pool of 2 saw about one read in ten fail while the server was read-only). A pool of one and a
// lock that holds the first read queue a write and then reads behind it, in that order; the
// listing's COPY, whose query settles once its rows start, comes last.
t.test('a refused write on a busy pool: the reads waiting behind it are served, and its connection closes after them', { skip }, async (t) => {
  const url = await createPostgresDatabase(t)
  const name = new URL(url).pathname.slice(1)
  const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => admin.end())
  const { app } = await productionApp(t, url, { DB_POOL_MAX: '1' })
  const signup = (username: string) => app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })
  const login = async (email: string) => (await app.inject({ method: 'POST', url: '/auth/login', payload: { email, password: 'Secreto123' } })).json().token as string
  for (const username of ['reader', 'boss']) await assertSignedUp(t, app, await signup(username), { username, email: `${username}@example.com` })
  // A session of the test's own on the service's database: the role now, the lock below.
  const direct = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => direct.end({ timeout: 1 }))
  await direct`update users set role = 'ROLE_ADMIN' where username = 'boss'`
  // Enough rows that the listing's COPY comes in several reads of the socket.
  await direct`insert into users (username, username_key, email, password_hash) select 'bulk' || n, 'bulk' || n, 'bulk' || n || '@example.com', 'x' from generate_series(1, 3000) n`
  const bulk = Array.from({ length: 3000 }, (_, i) => ({ id: i + 3, username: `bulk${i + 1}`, email: `bulk${i + 1}@example.com`, role: 'ROLE_USER' }))
  const [readerToken, bossToken] = [await login('reader@example.com'), await login('boss@example.com')]
  const reader = { id: 1, username: 'reader', email: 'reader@example.com', role: 'ROLE_USER' }
  const me = () => app.inject({ url: '/users/me', headers: { authorization: `Bearer ${readerToken}` } })

  await admin.unsafe(`alter database ${name} set default_transaction_read_only = on`)
  await admin.unsafe(`select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`)
  await sleep(200)
  // The pool's connection anew (read-only), then its next read held by a lock.
  t.equal((await me()).statusCode, 200)
  let unlock = () => {}
  const locked = new Promise<void>((resolve) => { unlock = resolve })
  let holding = () => {}
  const held = new Promise<void>((resolve) => { holding = resolve })
  const lockTx = direct.begin('read write', async (tx) => {
    await tx`lock table users in access exclusive mode`
    holding()
    await locked
  })
  await held
  const stats = app.database.poolStats
  const queued = async (inFlight: number, waiting: number) => {
    for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(2)) {
      const now = stats()
      if (now.inFlight === inFlight && now.waiting === waiting) return
    }
    t.fail(`pool never had ${inFlight} queries, ${waiting} waiting: ${JSON.stringify(stats())}`)
  }
  const sessionsOfPool = async () => (await admin.unsafe(`select pid from pg_stat_activity where datname = '${name}' and application_name = 'user-management'`)).map((row) => row.pid as number)
  const first = me()
  await queued(1, 0)
  // The pool's one connection, the one the write is refused on.
  const [refusing, ...others] = await sessionsOfPool()
  t.strictSame(others, [], 'one connection')
  const write = signup('ro.queued')
  await queued(2, 1)
  const listing = app.inject({ url: '/admin/users', headers: { authorization: `Bearer ${bossToken}` } })
  await queued(3, 2)
  const second = me()
  await queued(4, 3)
  unlock()
  await lockTx

  const answer = async (response: ReturnType<typeof me>) => {
    const r = await response
    try { return [r.statusCode, r.json()] } catch { return [r.statusCode, r.body.slice(0, 200)] }
  }
  t.strictSame(await answer(first), [200, reader], 'the read that held the connection')
  const refused = await write
  t.strictSame([refused.statusCode, refused.headers['retry-after'], refused.json()], [503, '1', UNAVAILABLE], 'the write is refused')
  t.strictSame(await answer(listing), [200, [reader, { id: 2, username: 'boss', email: 'boss@example.com', role: 'ROLE_ADMIN' }, ...bulk]], 'the listing handed the refusing connection is served, its COPY too')
  t.strictSame(await answer(second), [200, reader], 'the read behind it too')
  // Once nothing waits on it, the connection that saw the refusal closes.
  let open = true
  for (const deadline = Date.now() + 3000; open && Date.now() < deadline; await sleep(50)) open = (await sessionsOfPool()).includes(refusing)
  t.equal(open, false, 'the refusing connection is closed')
  t.strictSame(await answer(me()), [200, reader], 'the pool serves on a new connection')
})
