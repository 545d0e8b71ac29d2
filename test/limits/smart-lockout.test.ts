import { eq, sql } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { buildApp, type App } from '../../src/app.js'
import { familiarAddresses, users } from '../../src/db/schema.js'
import { assertBadCredentials, assertLoggedIn, assertSignedUp, assertTooMany, createTestDatabase, loginFrom, testConfig, testDatabases } from '../helper.js'

const bob = { username: 'bob', email: 'bob@example.com', password: 'Secreto123' }

const login = (app: App, password: string, remoteAddress: string) => loginFrom(app, remoteAddress, bob.email, password)

/** 50 wrong passwords for bob, ten from each of five strangers' addresses: no pair is over its limit. */
async function lockBobsEmail (t: Test, app: App) {
  for (let i = 0; i < 50; i++) assertBadCredentials(t, await login(app, 'Wrong12345', `203.0.113.${Math.floor(i / 10) + 1}`), `failure ${i + 1}`)
}

for (const kind of testDatabases()) {
  t.test(`smart lockout (CONTRACT §9) on ${kind}`, async (t) => {
    // Two instances over one database and no Redis: each counts on its own, both see familiar addresses.
    const { database } = await createTestDatabase(t, kind)
    const instance = async () => {
      const app = await buildApp(testConfig({ RATE_LIMITS: 'on' }), { database })
      t.teardown(() => app.close())
      return app
    }
    const [first, second] = [await instance(), await instance()]
    await assertSignedUp(t, first, await first.inject({ method: 'POST', url: '/auth/signup', payload: bob, remoteAddress: '10.9.9.9' }), bob)
    const [{ id }] = await database.db.select({ id: users.id }).from(users).where(eq(users.email, bob.email))
    const bobsAccount = { ...bob, id }
    assertLoggedIn(t, await login(first, bob.password, '198.51.100.10'), bobsAccount, 'bob signs in from home')
    assertLoggedIn(t, await login(first, bob.password, '2001:db8:1:2::5'), bobsAccount, 'and from his IPv6 network')
    const rows = await database.db.select({ address: familiarAddresses.address }).from(familiarAddresses).orderBy(familiarAddresses.address)
    t.strictSame(rows, [{ address: '198.51.100.10' }, { address: '2001:db8:1:2::' }], 'familiar addresses as the limits count them (IPv6 per /64)')

    await lockBobsEmail(t, first)
    await lockBobsEmail(t, second)
    assertTooMany(t, await login(second, bob.password, '203.0.113.99'), 'a stranger\'s address is refused, even with the right password')
    assertLoggedIn(t, await login(second, bob.password, '198.51.100.10'), bobsAccount, 'bob still signs in from home, on the instance that never saw him')
    assertLoggedIn(t, await login(second, bob.password, '2001:db8:1:2:abcd::1'), bobsAccount, 'and from another host of his /64')
    assertLoggedIn(t, await login(first, bob.password, '198.51.100.10'), bobsAccount, 'and on the first instance')
    assertTooMany(t, await login(first, bob.password, '203.0.113.99'), 'the stranger is still refused there')

    for (let i = 0; i < 10; i++) assertBadCredentials(t, await login(second, 'Wrong12345', '198.51.100.10'))
    assertTooMany(t, await login(second, bob.password, '198.51.100.10'), 'the pair limit still applies to a familiar address')

    // Thirty days without a login from there: the address is a stranger's again.
    await database.db.update(familiarAddresses).set({ lastSeen: sql`now() - interval '31 days'` }).where(eq(familiarAddresses.address, '2001:db8:1:2::'))
    const third = await instance()
    await lockBobsEmail(t, third)
    assertTooMany(t, await login(third, bob.password, '2001:db8:1:2::5'), 'a familiar address expires after 30 days')
  })
}
