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
