import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t from 'tap'
import usersPlugin from '../../src/plugins/users.js'
import { createTestDatabase, testConfig } from '../helper.js'

// The plugin alone, on a bare instance with a stand-in for the db plugin it depends on.
for (const seed of [true, false]) {
  t.test(`the repository and the password manager over the app's database; seed ${seed}`, async (t) => {
    const { database } = await createTestDatabase(t, 'pglite')
    const app = Fastify()
    await app.register(fp(async (app) => { app.decorate('database', database) }, { name: 'db' }))
    await app.register(usersPlugin, { config: testConfig(), seed })
    t.teardown(() => app.close())
    await app.ready()
    const admin = await app.usersRepository.findByEmail('ADMIN@example.com')
    if (!seed) return t.equal(admin, undefined, 'nothing seeded')
    t.strictSame(admin && { ...admin, passwordHash: admin.passwordHash.slice(0, 10) }, { id: 1, username: 'admin', email: 'admin@example.com', role: 'ROLE_ADMIN', passwordHash: '$argon2id$' })
    const login = await app.passwords.checkLogin('Admin1234', async () => admin)
    t.strictSame([login.valid, login.needsRehash], [true, false], 'the seed password verifies, hashed with the configured cost')
  })
}

t.test('the development accounts are hashed while the later plugins register, and are in before the app is ready', async (t) => {
  const { database } = await createTestDatabase(t, 'pglite')
  const app = Fastify()
  await app.register(fp(async (app) => { app.decorate('database', database) }, { name: 'db' }))
  // A cost that keeps both hashes busy well past the next plugin's registration.
  await app.register(usersPlugin, { config: testConfig({ ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '20' }), seed: true })
  let duringRegistration: unknown = 'not asked'
  await app.register(async (app) => { duringRegistration = await app.usersRepository.findByEmail('user@example.com') })
  t.teardown(() => app.close())
  await app.ready()
  t.equal(duringRegistration, undefined, 'not yet in while the next plugin registered')
  const user = await app.usersRepository.findByEmail('user@example.com')
  t.strictSame(user && { ...user, passwordHash: user.passwordHash.slice(0, 10) }, { id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER', passwordHash: '$argon2id$' })
})

t.test('a development seed that fails makes the app fail to get ready', async (t) => {
  const { database } = await createTestDatabase(t, 'pglite')
  await database.close()
  const app = Fastify()
  await app.register(fp(async (app) => { app.decorate('database', database) }, { name: 'db' }))
  await app.register(usersPlugin, { config: testConfig(), seed: true })
  await t.rejects(async () => { await app.ready() }, { message: /^Failed query: insert into "users"/, cause: { message: 'PGlite is closed' } }, 'the insert on a closed database fails the start')
})
