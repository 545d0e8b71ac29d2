import t, { type Test } from 'tap'
import argon2 from 'argon2'
import { eq } from 'drizzle-orm'
import { users } from '../../src/db/schema.js'
import { assertLoggedIn, build, captureLog, errorBodies, seedAccounts, testDatabases, uniqueUser } from '../helper.js'

const invalidCredentials = errorBodies.badCredentials
const { user } = seedAccounts

for (const kind of testDatabases()) {
  t.test(`sign-up and login rules on ${kind}`, async (t) => {
    const hashTimings: string[] = []
    const app = await build(t, kind, { onHashTiming: (operation) => hashTimings.push(operation) })
    const { db } = app.testDatabase.database
    /** Signs `body` up and checks the whole 201 against the row stored. */
    async function signUp (t: Test, body: { username: string, email: string, password: string }) {
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: body })
      t.equal(response.statusCode, 201)
      const [row] = await db.select().from(users).where(eq(users.email, body.email))
      t.strictSame(response.json(), { id: row?.id, username: body.username, email: body.email })
    }

    t.test('20 identical sign-ups at once: one 201 and nineteen 409, never a 500', async (t) => {
      const body = uniqueUser('race')
      const responses = await Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'POST', url: '/auth/signup', payload: body })))
      const statuses = responses.map((r) => r.statusCode).sort()
      t.strictSame(statuses, [201, ...Array(19).fill(409)])
      for (const response of responses.filter((r) => r.statusCode === 409)) {
        t.strictSame(response.json(), { email: 'El email ya está registrado', username: 'El username ya está en uso' })
      }
      const rows = await db.select().from(users).where(eq(users.email, body.email))
      t.equal(rows.length, 1, 'exactly one row stored')
      const created = responses.find((r) => r.statusCode === 201)!
      t.strictSame(created.json(), { id: rows[0].id, username: body.username, email: body.email })
    })

    t.test('a stored hash weaker than the configured cost is re-hashed on a successful login', async (t) => {
      const body = uniqueUser('rehash')
      await signUp(t, body)
      const weak = await argon2.hash(body.password, { type: argon2.argon2id, memoryCost: 128, timeCost: 1, parallelism: 1 })
      await db.update(users).set({ passwordHash: weak }).where(eq(users.email, body.email))

      const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password } })
      const [row] = await db.select().from(users).where(eq(users.email, body.email))
      assertLoggedIn(t, login, row)
      t.not(row.passwordHash, weak, 'the hash was replaced')
      t.match(row.passwordHash, /^\$argon2id\$v=19\$m=256,p=1,t=1\$/, 'with the configured cost')
      t.ok(await argon2.verify(row.passwordHash, body.password), 'and still verifies the same password')

      const again = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password } })
      assertLoggedIn(t, again, row, 'logged in again')
      const [unchanged] = await db.select().from(users).where(eq(users.email, body.email))
      t.equal(unchanged.passwordHash, row.passwordHash, 'a hash at the configured cost is left alone')
    })

    t.test('a login password over 128 characters is refused without hashing', async (t) => {
      const body = uniqueUser('long')
      await signUp(t, body)
      const before = hashTimings.length
      const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: 'A1a' + 'x'.repeat(126) } })
      t.equal(response.statusCode, 401)
      t.strictSame(response.json(), invalidCredentials)
      t.equal(hashTimings.length, before, 'argon2 never ran')
      const exactly128 = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: 'A1a' + 'x'.repeat(125) } })
      t.equal(exactly128.statusCode, 401)
      t.strictSame(exactly128.json(), invalidCredentials)
      t.equal(hashTimings.length, before + 1, '128 characters are still verified')
    })

    t.test('an unknown e-mail is verified against the dummy hash, like a wrong password', async (t) => {
      const before = hashTimings.length
      const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nobody.here@example.com', password: 'Secreto123' } })
      t.equal(response.statusCode, 401)
      t.strictSame(response.json(), invalidCredentials)
      t.strictSame(hashTimings.slice(before), ['verify'], 'one argon2 verify ran')
    })

    t.test('the e-mail is matched without regard to case; the password is not', async (t) => {
      const body = uniqueUser('case')
      await signUp(t, body)
      const upper = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email.toUpperCase(), password: body.password } })
      const [row] = await db.select().from(users).where(eq(users.email, body.email))
      assertLoggedIn(t, upper, row, 'the e-mail as stored, lower-cased')
      const swapped = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password.toLowerCase() } })
      t.equal(swapped.statusCode, 401)
      t.strictSame(swapped.json(), invalidCredentials)
    })
  })
}

t.test('hashing saturated: beyond the running and 64 waiting jobs, 503 with Retry-After: 1', async (t) => {
  // One slot and a deliberately slow hash (a few hundred ms: every login reaches the queue before
  // the first hash ends, even on a busy machine), so 100 logins at once overflow the queue.
  const log = captureLog()
  const app = await build(t, 'pglite', { env: { HASH_CONCURRENCY: '1', ARGON2_MEMORY_KIB: '65536', ARGON2_ITERATIONS: '4' }, logger: { level: 'info', stream: log.stream } })
  const responses = await Promise.all(Array.from({ length: 100 }, () =>
    app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'user@example.com', password: 'User12345' } })))
  const refused = responses.filter((r) => r.statusCode === 503)
  const served = responses.filter((r) => r.statusCode === 200)
  t.equal(refused.length + served.length, 100, 'every login is either served or refused')
  t.ok(refused.length >= 35, `at least the 35 beyond the queue are refused (${refused.length})`)
  // Refused at once for the queue's bound, not after the 2 s wait (which refuses the rest).
  const reasons = log.text().match(/argon2 queue: [^"]*/g) ?? []
  t.equal(reasons.filter((reason) => reason === 'argon2 queue: all 1 running, 64 waiting').length, 35, 'exactly the 35 beyond one running and 64 waiting')
  t.ok(served.length >= 1, `the running and some queued ones are served (${served.length})`)
  for (const response of served) assertLoggedIn(t, response, user)
  for (const response of refused) {
    t.equal(response.headers['retry-after'], '1')
    t.strictSame(response.json(), errorBodies.unavailable)
  }
})

t.test('only hashes weaker than the configured cost need a re-hash', async (t) => {
  const { weakerThan } = await import('../../src/users/password-manager.js')
  const cost = { memoryCost: 19456, timeCost: 2, parallelism: 1 }
  t.equal(weakerThan('$argon2id$v=19$m=19456,p=1,t=2$c2FsdA$aGFzaA', cost), false, 'equal cost')
  t.equal(weakerThan('$argon2id$v=19$m=65536,p=4,t=3$c2FsdA$aGFzaA', cost), false, 'stronger cost is kept')
  t.equal(weakerThan('$argon2id$v=19$m=4096,p=1,t=2$c2FsdA$aGFzaA', cost), true, 'less memory')
  t.equal(weakerThan('$argon2id$v=19$m=19456,p=1,t=1$c2FsdA$aGFzaA', cost), true, 'fewer iterations')
  t.equal(weakerThan('$argon2i$v=19$m=65536,p=4,t=3$c2FsdA$aGFzaA', cost), true, 'another variant')
  t.equal(weakerThan('$argon2id$v=16$m=65536,p=4,t=3$c2FsdA$aGFzaA', cost), true, 'an older version')
})

t.test('a failed re-hash is logged and the login still succeeds', async (t) => {
  const log = captureLog()
  const app = await build(t, 'pglite', { logger: { level: 'warn', stream: log.stream } })
  const weak = await argon2.hash('User12345', { type: argon2.argon2id, memoryCost: 128, timeCost: 1, parallelism: 1 })
  await app.testDatabase.database.db.update(users).set({ passwordHash: weak }).where(eq(users.email, 'user@example.com'))
  app.usersRepository.updatePasswordHash = async () => { throw new Error('disk full') }
  const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'user@example.com', password: 'User12345' } })
  assertLoggedIn(t, login, user)
  const warning = log.lines.find((entry) => entry.msg === 'password re-hash failed; login goes on')
  t.match(warning, { level: 40, userId: 2, err: { message: 'disk full' } }, 'the failure is logged as a warning')
})
