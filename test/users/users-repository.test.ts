import t from 'tap'
import { createUsersRepository } from '../../src/users/users-repository.js'
import { createTestDatabase, testDatabases } from '../helper.js'

for (const kind of testDatabases()) {
  t.test(`${kind}: findById answers the public record as stored, or undefined`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const repository = createUsersRepository(database)
    const created = await repository.create({ username: 'Ana María', email: 'Ana@Example.com', passwordHash: '$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2g' })
    t.strictSame(await repository.findById(created.id), { id: created.id, username: 'Ana María', email: 'ana@example.com', role: 'ROLE_USER' })
    t.equal(await repository.findById(created.id + 1000), undefined)
    // The role as it is now, not as it was when the record was first read.
    await repository.setRole('ana@example.com', 'ROLE_ADMIN')
    t.strictSame(await repository.findById(created.id), { id: created.id, username: 'Ana María', email: 'ana@example.com', role: 'ROLE_ADMIN' })
  })
}
