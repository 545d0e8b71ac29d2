import t from 'tap'
import { UserRecord } from '../../src/schemas/users.js'
import { LISTING_FIELDS, usersJsonStream } from '../../src/users/users-listing.js'
import { createTestDatabase, seedAccounts, testDatabases } from '../helper.js'
import { newUserRow } from '../../src/users/users-repository.js'
import { users } from '../../src/db/schema.js'

// The listing writes its JSON by hand (src/db/copy-json.ts), from the UserRecord schema's
// fields: a field added to the schema must reach the listing, or this fails.
t.test('the listing\'s fields are the UserRecord schema\'s, in its order', async (t) => {
  t.strictSame(LISTING_FIELDS.map((field) => field.name), Object.keys(UserRecord.properties))
})

for (const kind of testDatabases()) {
  t.test(`every listed user (${kind}) has exactly the UserRecord fields`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    await database.db.insert(users).values([
      newUserRow({ username: seedAccounts.user.username, email: seedAccounts.user.email, passwordHash: 'x' }),
      newUserRow({ username: 'ñandú "q"', email: 'n@example.com', passwordHash: 'x', role: 'ROLE_ADMIN' })
    ])
    const chunks: Buffer[] = []
    for await (const chunk of await usersJsonStream(database)) chunks.push(Buffer.from(chunk))
    const listed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown[]
    t.strictSame(listed, [
      { id: 1, username: 'user', email: 'user@example.com', role: 'ROLE_USER' },
      { id: 2, username: 'ñandú "q"', email: 'n@example.com', role: 'ROLE_ADMIN' }
    ])
    t.strictSame(listed.map((user) => Object.keys(user as object)), listed.map(() => Object.keys(UserRecord.properties)), 'the schema\'s keys, in its order')
  })
}
