import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { users } from '../../src/db/schema.js'
import { LOGIN_WINDOW_MS } from '../../src/limits/policy.js'
import { assertBadCredentials, assertLoggedIn, assertTooMany, build, captureLog, errorBodies, loginFrom, redisPrefix, redisSkipReason, seedAccounts, TEST_REDIS_URL as REDIS_URL, testDatabases } from '../helper.js'

const { badCredentials } = errorBodies

const LIMITS_ON = { RATE_LIMITS: 'on' }
const { user } = seedAccounts

const login = (app: App, email: string, password: string, remoteAddress = '203.0.113.200') => loginFrom(app, remoteAddress, email, password)

/** `count` wrong-password logins, each of which must get the plain 401. */
async function fail (t: Test, app: App, count: number, email: string, remoteAddress?: string | ((i: number) => string)) {
  for (let i = 0; i < count; i++) {
    const address = typeof remoteAddress === 'function' ? remoteAddress(i) : remoteAddress
    assertBadCredentials(t, await login(app, email, 'Wrong12345', address), `attempt ${i + 1} for ${email} from ${address}`)
  }
}

/** 429 with the contract's body and a Retry-After within the window. */
const assertLocked = (t: Test, response: Awaited<ReturnType<App['inject']>>, message: string) => assertTooMany(t, response, message, LOGIN_WINDOW_MS / 1000)

const redisSkip = await redisSkipReason('shared counters not tested')

for (const kind of testDatabases()) {
  t.test(`failed-login limits (CONTRACT §9) on ${kind}`, async (t) => {
    // One instance for the in-memory cases; each case keeps to its own addresses and e-mails.
    const app = await build(t, kind, { env: LIMITS_ON })
    /** A fresh account, so a case's lock never leaks into another case. */
    const account = async (name: string) => {
      const created = { username: `${name}${kind}`.slice(0, 20), email: `${name}.${kind}@example.com`, password: 'Secreto123' }
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: created, remoteAddress: '10.9.9.9' })
      t.equal(response.statusCode, 201, `account ${name} created`)
      const [stored] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, created.email))
      t.strictSame(response.json(), { id: stored.id, username: created.username, email: created.email })
      return { ...created, id: stored.id }
    }

    t.test('the 11th failed login for one address and e-mail gets 429 with Retry-After, even with the right password', async (t) => {
      // The e-mail is counted lower-cased: both spellings feed one counter.
      await fail(t, app, 5, user.email, '203.0.113.1')
      await fail(t, app, 5, user.email.toUpperCase(), '203.0.113.1')
      assertLocked(t, await login(app, user.email, user.password, '203.0.113.1'), 'the right password is refused too')
      assertLocked(t, await login(app, user.email, 'Wrong12345', '203.0.113.1'), 'and so is a wrong one')
      assertLoggedIn(t, await login(app, user.email, user.password, '203.0.113.2'), user, 'the same e-mail from another address still logs in')
      const otherEmail = await login(app, 'otra@example.com', 'Wrong12345', '203.0.113.1')
      t.equal(otherEmail.statusCode, 401, 'another e-mail from the same address is still checked')
      t.strictSame(otherEmail.json(), badCredentials)
    })

    t.test('counting is the same whether the account exists or not', async (t) => {
      await fail(t, app, 10, 'nadie@example.com', '203.0.113.3')
      assertLocked(t, await login(app, 'nadie@example.com', 'Wrong12345', '203.0.113.3'), 'an unknown e-mail locks after 10 failures too')
    })

    t.test('only a success clears its pair\'s counter', async (t) => {
      const ana = await account('ana')
      await fail(t, app, 9, ana.email, '203.0.113.4')
      assertLoggedIn(t, await login(app, ana.email, ana.password, '203.0.113.4'), ana, 'the right password before the limit')
      await fail(t, app, 10, ana.email, '203.0.113.4')
      assertLocked(t, await login(app, ana.email, ana.password, '203.0.113.4'), 'ten new failures after the success lock the pair')
    })

    t.test('per e-mail: the 51st failure across addresses gets 429', async (t) => {
      const eva = await account('eva')
      // Ten from each of five addresses: no pair is over its limit.
      await fail(t, app, 50, eva.email, (i) => `198.51.100.${Math.floor(i / 10) + 1}`)
      assertLocked(t, await login(app, eva.email, eva.password, '198.51.100.99'), 'a fresh address is refused for that e-mail')
      assertLoggedIn(t, await login(app, seedAccounts.admin.email, seedAccounts.admin.password, '198.51.100.99'), seedAccounts.admin, 'other e-mails are untouched')
    })

    t.test('per address: the 101st failure across e-mails gets 429 for every e-mail', async (t) => {
      const luz = await account('luz')
      for (let n = 0; n < 10; n++) await fail(t, app, 10, `victima${n}@example.com`, '192.0.2.50')
      assertLocked(t, await login(app, 'otra@example.com', 'Wrong12345', '192.0.2.50'), 'a new e-mail from that address')
      assertLocked(t, await login(app, luz.email, luz.password, '192.0.2.50'), 'a valid login from that address')
      assertLoggedIn(t, await login(app, luz.email, luz.password, '192.0.2.51'), luz, 'another address logs in')
    })

    t.test('IPv6 clients count per /64, IPv4-mapped addresses as IPv4', async (t) => {
      const pau = await account('pau')
      await fail(t, app, 10, pau.email, (i) => `2001:db8:a:b::${i + 1}`)
      assertLocked(t, await login(app, pau.email, pau.password, '2001:db8:a:b:ffff:ffff:ffff:ffff'), 'another host of the same /64')
      assertLoggedIn(t, await login(app, pau.email, pau.password, '2001:db8:a:c::1'), pau, 'the next /64 is another client')
      await fail(t, app, 10, pau.email, '::ffff:198.51.100.7')
      assertLocked(t, await login(app, pau.email, pau.password, '198.51.100.7'), 'the plain IPv4 form of a mapped address')
    })

    t.test('RATE_LIMITS=off turns the counters off', async (t) => {
      const off = await build(t, kind, { env: { RATE_LIMITS: 'off' } })
      await fail(t, off, 12, user.email)
      assertLoggedIn(t, await login(off, user.email, user.password), user, 'no lock after 12 failures')
    })

    t.test('with Redis, the attempts of two instances add up', { skip: redisSkip }, async (t) => {
      const limitsKeyPrefix = redisPrefix(t)
      const env = { ...LIMITS_ON, REDIS_URL }
      const first = await build(t, kind, { env, limitsKeyPrefix })
      const second = await build(t, kind, { env, limitsKeyPrefix })
      await fail(t, first, 5, user.email)
      await fail(t, second, 5, user.email)
      assertLocked(t, await login(first, user.email, user.password), 'the 11th, on the first instance')
      assertLocked(t, await login(second, user.email, user.password), 'and on the second')
      assertLoggedIn(t, await login(second, user.email, user.password, '203.0.113.9'), user, 'another address still logs in')
    })

    t.test('with Redis down, logins still work and the counters fall back to memory', async (t) => {
      const log = captureLog()
      const down = await build(t, kind, { env: { ...LIMITS_ON, REDIS_URL: 'redis://127.0.0.1:1' }, logger: { level: 'warn', stream: log.stream } })
      const started = Date.now()
      assertLoggedIn(t, await login(down, user.email, user.password), user, 'a login succeeds')
      t.ok(Date.now() - started < 2000, 'without waiting for Redis')
      await fail(t, down, 10, user.email)
      assertLocked(t, await login(down, user.email, user.password), 'the instance\'s own counters still lock the pair')
      t.ok(log.raw.some((line) => /falls back to this instance/.test(line)), 'a warning says so')
    })
  })
}
