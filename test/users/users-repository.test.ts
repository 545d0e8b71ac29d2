import t from 'tap'
import { createUsersRepository } from '../../src/users/users-repository.js'
import type { Database } from '../../src/db/database.js'
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

/** The database with every `usersByIds` statement recorded, and a way to make them fail. */
function countedDatabase (database: Database) {
  const statements: number[][] = []
  let failure: Error | undefined
  const counted: Database = {
    ...database,
    async usersByIds (ids) {
      statements.push([...ids])
      if (failure) throw failure
      return await database.usersByIds(ids)
    }
  }
  return { counted, statements, failWith: (error: Error | undefined) => { failure = error } }
}

const hash = '$argon2id$v=19$m=256,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2g'

for (const kind of testDatabases()) {
  t.test(`${kind}: look-ups asked in one turn share one statement, each answered its own row`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const { counted, statements } = countedDatabase(database)
    const repository = createUsersRepository(counted)
    const ana = await repository.create({ username: 'ana', email: 'ana@example.com', passwordHash: hash })
    const bea = await repository.create({ username: 'bea', email: 'bea@example.com', passwordHash: hash, role: 'ROLE_ADMIN' })
    const answers = await Promise.all([bea.id, ana.id, ana.id + 1000, bea.id].map((id) => repository.findById(id)))
    t.strictSame(answers, [
      { id: bea.id, username: 'bea', email: 'bea@example.com', role: 'ROLE_ADMIN' },
      { id: ana.id, username: 'ana', email: 'ana@example.com', role: 'ROLE_USER' },
      undefined,
      { id: bea.id, username: 'bea', email: 'bea@example.com', role: 'ROLE_ADMIN' }
    ])
    t.strictSame(statements, [[bea.id, ana.id, ana.id + 1000, bea.id]])
    // Nothing is kept: the next turn reads the row again, as it is now.
    await repository.setRole('ana@example.com', 'ROLE_ADMIN')
    t.strictSame(await repository.findById(ana.id), { id: ana.id, username: 'ana', email: 'ana@example.com', role: 'ROLE_ADMIN' })
    t.strictSame(statements, [[bea.id, ana.id, ana.id + 1000, bea.id], [ana.id]])
  })

  t.test(`${kind}: an id no row can have misses without a statement and fails no other look-up`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const { counted, statements } = countedDatabase(database)
    const repository = createUsersRepository(counted)
    const ana = await repository.create({ username: 'ana', email: 'ana@example.com', passwordHash: hash })
    const answers = await Promise.all([2 ** 31, ana.id, 0, 1.5].map((id) => repository.findById(id)))
    t.strictSame(answers, [undefined, { id: ana.id, username: 'ana', email: 'ana@example.com', role: 'ROLE_USER' }, undefined, undefined])
    t.strictSame(statements, [[ana.id]])
  })

  t.test(`${kind}: a failed statement fails each look-up that shared it, and the next turn reads again`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const { counted, statements, failWith } = countedDatabase(database)
    const repository = createUsersRepository(counted)
    const ana = await repository.create({ username: 'ana', email: 'ana@example.com', passwordHash: hash })
    const outage = new Error('connection lost')
    failWith(outage)
    const failed = await Promise.allSettled([ana.id, ana.id + 1].map((id) => repository.findById(id)))
    t.strictSame(failed, [{ status: 'rejected', reason: outage }, { status: 'rejected', reason: outage }])
    failWith(undefined)
    t.strictSame(await repository.findById(ana.id), { id: ana.id, username: 'ana', email: 'ana@example.com', role: 'ROLE_USER' })
    t.strictSame(statements, [[ana.id, ana.id + 1], [ana.id]])
  })
}
