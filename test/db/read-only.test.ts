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
  t.match(causeChain(line?.cause).find((c) => c.code === '25006'), { code: '25006', message: 'cannot execute INSERT in a read-only transaction' }, 'the log says why, in the server\'s words')
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
