import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { users } from '../../src/db/schema.js'
import { assertBadCredentials, assertLoggedIn, assertSignedUp, assertTooMany, build, errorBodies, loginFrom, testDatabases, uniqueUser } from '../helper.js'

const { unavailable } = errorBodies

type Answer = Awaited<ReturnType<App['inject']>>
interface Account { id: number, username: string, email: string, password: string }

const login = (app: App, user: Account, password: string, remoteAddress: string) => loginFrom(app, remoteAddress, user.email, password)

/** A fresh account for each case, so no case inherits another's failures. */
async function account (t: Test, app: App): Promise<Account> {
  const created = uniqueUser('lo')
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', payload: created, remoteAddress: '10.9.9.9' }), created)
  const [{ id }] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, created.email))
  return { ...created, id }
}

/** Every answer is a 200 with a token or the contract's 503; returns how many of each. */
function tally (t: Test, user: Account, answers: Answer[]) {
  const counts: Record<string, number> = {}
  for (const answer of answers) {
    counts[answer.statusCode] = (counts[answer.statusCode] ?? 0) + 1
    if (answer.statusCode === 503) {
      t.strictSame(answer.json(), unavailable)
      t.equal(answer.headers['retry-after'], '1')
    } else if (answer.statusCode === 200) {
      assertLoggedIn(t, answer, user)
    }
  }
  t.strictSame(Object.keys(counts).sort(), Object.keys(counts).filter((s) => s === '200' || s === '503').sort(), `only 200s and 503s: ${JSON.stringify(counts)}`)
  t.ok(counts[200] > 0, 'some logins got through')
  return counts
}

/** Ten wrong passwords are allowed before the lock, and the eleventh attempt is refused. */
async function assertTenFailuresLeft (t: Test, app: App, user: Account, address: string) {
  for (let i = 0; i < 10; i++) assertBadCredentials(t, await login(app, user, 'Wrong12345', address), `failure ${i + 1} is checked`)
  assertTooMany(t, await login(app, user, user.password, address), 'the eleventh is refused')
}

for (const kind of testDatabases()) {
  t.test(`only failures count (CONTRACT §9) on ${kind}`, async (t) => {
    // One hash at a time, at the production cost: a burst saturates hashing for real.
    const app = await build(t, kind, { env: { RATE_LIMITS: 'on', HASH_CONCURRENCY: '1', ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '2' } })

    t.test('150 concurrent right-password logins from one address: 200s and 503s, never 429, and no lock after', async (t) => {
      const user = await account(t, app)
      const answers = await Promise.all(Array.from({ length: 150 }, () => login(app, user, user.password, '203.0.113.60')))
      t.comment(JSON.stringify(tally(t, user, answers)))
      await assertTenFailuresLeft(t, app, user, '203.0.113.60')
    })

    t.test('150 concurrent right-password logins from 150 addresses: 200s and 503s, never 429, and no lock after', async (t) => {
      const user = await account(t, app)
      const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => login(app, user, user.password, `198.51.${100 + Math.floor(i / 100)}.${i % 100}`)))
      t.comment(JSON.stringify(tally(t, user, answers)))
      // The e-mail's 50 failures are all still to come: five addresses, ten each, none refused.
      for (let i = 0; i < 50; i++) assertBadCredentials(t, await login(app, user, 'Wrong12345', `192.0.2.${Math.floor(i / 10)}`))
      assertTooMany(t, await login(app, user, user.password, '192.0.2.200'), 'the 51st failure for the e-mail is refused')
    })

    t.test('logins answered 503 because the database is down are not failures', async (t) => {
      const user = await account(t, app)
      const findByEmail = app.usersRepository.findByEmail
      app.usersRepository.findByEmail = async () => { throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }) }
      for (let i = 0; i < 15; i++) {
        const response = await login(app, user, 'Wrong12345', '203.0.113.61')
        t.equal(response.statusCode, 503)
        t.strictSame(response.json(), unavailable)
      }
      app.usersRepository.findByEmail = findByEmail
      await assertTenFailuresLeft(t, app, user, '203.0.113.61')
    })

    t.test('logins refused with 400 are not failures', async (t) => {
      const user = await account(t, app)
      for (let i = 0; i < 15; i++) {
        const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: user.email }, remoteAddress: '203.0.113.62' })
        t.equal(response.statusCode, 400)
        t.strictSame(response.json(), { password: 'La password es obligatoria' })
      }
      await assertTenFailuresLeft(t, app, user, '203.0.113.62')
    })
  })
}
