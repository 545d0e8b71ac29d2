import DataLoader from 'dataloader'
import { eq, or, sql } from 'drizzle-orm'
import type { Database } from '../db/database.js'
import { publicColumns } from '../db/queries.js'
import { users } from '../db/schema.js'
import { uniqueViolation } from '../db/pg-errors.js'
import { inStatementSpan } from '../telemetry/spans.js'
import { DuplicateUserError, type UniqueField } from '../http/errors.js'
import type { UserRecord } from '../schemas/users.js'
import { MAX_USER_ID, usernameKey } from './user.js'
import { DEFAULT_ROLE, type Role } from '../schemas/roles.js'
import { normalizeEmail, normalizeUsername } from '../schemas/user-rules.js'

export interface NewUser { username: string, email: string, passwordHash: string, role?: Role }

/** The row a new user is stored as: NFC username, its key, lower-cased e-mail, a role (the seed uses it too). */
export function newUserRow (input: NewUser) {
  const username = normalizeUsername(input.username)
  return { ...input, username, usernameKey: usernameKey(username), email: normalizeEmail(input.email), role: input.role ?? DEFAULT_ROLE }
}

/** Most ids one look-up statement carries; more wait for the next. */
const MAX_IDS_PER_LOOKUP = 128

/**
 * The look-up by id behind every authenticated request. The requests that reach it in one turn
 * of the event loop share one statement (`usersByIds`) instead of a round trip each: under load
 * one statement answers several requests, at no cost to freshness, since it runs after each of
 * them arrived. Nothing is cached: every call reads the row as it is now.
 * @see https://github.com/graphql/dataloader
 */
function batchedLookup (database: Database): (id: number) => Promise<UserRecord | undefined> {
  const loader = new DataLoader<number, UserRecord | undefined>(async (ids) => {
    // One span for the statement, under the request that opened the batch.
    const found = await inStatementSpan('SELECT', 'users_by_ids', () => database.usersByIds(ids), ids.length)
    const rows = new Map(found.map((row) => [row.id, row]))
    return ids.map((id) => rows.get(id))
  }, {
    cache: false,
    maxBatchSize: MAX_IDS_PER_LOOKUP,
    // After the turn's other requests (the poll phase's sockets) have asked too.
    batchScheduleFn: (send) => setImmediate(send)
  })
  // An id no row can have never joins a statement: it would fail the others' look-ups with it.
  return (id) => Number.isInteger(id) && id >= 1 && id <= MAX_USER_ID ? loader.load(id) : Promise.resolve(undefined)
}

/**
 * Plain async functions over the users table; e-mails and usernames are normalised on the way
 * in, statements prepared once. The look-up by id, on every authenticated request, is the
 * database's own (`usersByIds`), batched; everything else goes through Drizzle.
 */
export function createUsersRepository (database: Database) {
  const { db } = database
  const byEmail = db.select({ ...publicColumns, passwordHash: users.passwordHash }).from(users)
    .where(eq(users.email, sql.placeholder('email'))).prepare('users_by_email')
  // Sign-up's insert, built once rather than by Drizzle for every sign-up.
  const insert = db.insert(users).values({
    username: sql.placeholder('username'),
    usernameKey: sql.placeholder('usernameKey'),
    email: sql.placeholder('email'),
    passwordHash: sql.placeholder('passwordHash'),
    role: sql.placeholder('role')
  }).returning(publicColumns).prepare('users_insert')
  const conflicts = db.select({ email: users.email, usernameKey: users.usernameKey }).from(users)
    .where(or(eq(users.email, sql.placeholder('email')), eq(users.usernameKey, sql.placeholder('usernameKey'))))
    .prepare('users_conflicts')

  /** The fields of `user` that an existing account already holds. */
  async function collidingFields (user: ReturnType<typeof newUserRow>, constraint: string): Promise<UniqueField[]> {
    const fields = new Set<UniqueField>()
    for (const row of await inStatementSpan('SELECT', 'users_conflicts', () => conflicts.execute({ email: user.email, usernameKey: user.usernameKey }))) {
      if (row.email === user.email) fields.add('email')
      if (row.usernameKey === user.usernameKey) fields.add('username')
    }
    // The other account may have gone already; the violated index still names the field.
    if (fields.size === 0) fields.add(constraint.includes('email') ? 'email' : 'username')
    return (['email', 'username'] as const).filter((field) => fields.has(field))
  }

  return {
    async findByEmail (email: string) {
      const [row] = await inStatementSpan('SELECT', 'users_by_email', () => byEmail.execute({ email: normalizeEmail(email) }))
      return row
    },

    findById: batchedLookup(database),

    /** Inserts the user; the unique constraints decide duplicates, so racing sign-ups stay correct. */
    async create (input: NewUser): Promise<UserRecord> {
      const user = newUserRow(input)
      try {
        const [row] = await inStatementSpan('INSERT', 'users_insert', () => insert.execute(user))
        return row
      } catch (error) {
        const constraint = uniqueViolation(error)
        if (constraint === undefined) throw error
        throw new DuplicateUserError(await collidingFields(user, constraint))
      }
    },

    async updatePasswordHash (id: number, passwordHash: string): Promise<void> {
      await inStatementSpan('UPDATE', 'users_update_hash', async () => { await db.update(users).set({ passwordHash }).where(eq(users.id, id)) })
    },

    async setRole (email: string, role: Role): Promise<UserRecord | undefined> {
      const [row] = await db.update(users).set({ role }).where(eq(users.email, normalizeEmail(email))).returning(publicColumns)
      return row
    }
  }
}

export type UsersRepository = ReturnType<typeof createUsersRepository>
