import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t, { type Test } from 'tap'
import usersPlugin, { type UsersPluginOptions } from '../../src/plugins/users.js'
import type { Database } from '../../src/db/database.js'
import { createTestDatabase, testConfig } from '../helper.js'

/** The plugin alone, on a bare instance with a stand-in for the db plugin it depends on; not yet ready. */
async function withUsersPlugin (t: Test, database: Database, options: UsersPluginOptions) {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fp(async (app) => { app.decorate('database', database) }, { name: 'db' }))
  await app.register(usersPlugin, options)
  return app
}

for (const seed of [true, false]) {
  t.test(`the repository and the password manager over the app's database; seed ${seed}`, async (t) => {
    const { database } = await createTestDatabase(t, 'pglite')
    const app = await withUsersPlugin(t, database, { config: testConfig(), seed })
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
  // A cost that keeps both hashes busy well past the next plugin's registration.
  const app = await withUsersPlugin(t, database, { config: testConfig({ ARGON2_MEMORY_KIB: '19456', ARGON2_ITERATIONS: '20' }), seed: true })
  let duringRegistration: unknown = 'not asked'
  await app.register(async (app) => { duringRegistration = await app.usersRepository.findByEmail('user@example.com') })
  await app.ready()
  t.equal(duringRegistration, undefined, 'not yet in while the next plugin registered')
  const user = await app.usersRepository.findByEmail('user@example.com')
  t.strictSame(user && { ...user, passwordHash: user.passwordHash.slice(0, 10) }, { id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER', passwordHash: '$argon2id$' })
})

t.test('a development seed that fails makes the app fail to get ready', async (t) => {
  const { database } = await createTestDatabase(t, 'pglite')
  await database.close()
  const app = await withUsersPlugin(t, database, { config: testConfig(), seed: true })
  await t.rejects(async () => { await app.ready() }, { message: /^Failed query: insert into "users"/, cause: { message: 'PGlite is closed' } }, 'the insert on a closed database fails the start')
})
