import { eq, gt, sql } from 'drizzle-orm'
import type { AppDatabase } from '../db/client.js'
import { users, type Role } from '../db/schema.js'
import { uniqueViolation } from '../db/errors.js'
import { DuplicateUserError } from '../errors.js'
import { messages } from '../messages.js'

export interface NewUser { username: string, email: string, passwordHash: string, role?: Role }
export interface PublicUser { id: number, username: string, email: string, role: Role }

const publicColumns = { id: users.id, username: users.username, email: users.email, role: users.role }

/** Plain async functions over the users table; every statement is prepared once. */
export function createUsersRepository (db: AppDatabase) {
  const byEmail = db.select({ ...publicColumns, passwordHash: users.passwordHash }).from(users)
    .where(eq(users.email, sql.placeholder('email'))).prepare('users_by_email')
  const byId = db.select(publicColumns).from(users)
    .where(eq(users.id, sql.placeholder('id'))).prepare('users_by_id')
  const conflicts = db.select({ email: users.email, username: users.username }).from(users)
    .where(sql`${users.email} = ${sql.placeholder('email')} or lower(${users.username}) = lower(${sql.placeholder('username')})`)
    .prepare('users_conflicts')

  // PostgreSQL builds each batch of the listing as JSON text, so rows never become JS objects.
  const page = db.select({ id: users.id, json: sql<string>`json_build_object('id', ${users.id}, 'username', ${users.username}, 'email', ${users.email}, 'role', ${users.role})::text`.as('json') })
    .from(users).where(gt(users.id, sql.placeholder('after'))).orderBy(users.id).limit(sql.placeholder('size')).as('page')
  const listBatch = db.select({ json: sql<string | null>`string_agg(${page.json}, ',' order by ${page.id})`, last: sql<number | null>`max(${page.id})` })
    .from(page).prepare('users_list_batch')

  return {
    async findByEmail (email: string) {
      const [row] = await byEmail.execute({ email })
      return row
    },

    async findById (id: number): Promise<PublicUser | undefined> {
      const [row] = await byId.execute({ id })
      return row
    },

    /** Inserts the user; the unique indexes decide duplicates, so racing sign-ups stay correct. */
    async create (user: NewUser): Promise<PublicUser> {
      try {
        const [row] = await db.insert(users).values(user).returning(publicColumns)
        return row
      } catch (error) {
        const constraint = uniqueViolation(error)
        if (constraint === undefined) throw error
        throw new DuplicateUserError(await duplicatedFields(user, constraint))
      }
    },

    async updatePasswordHash (id: number, passwordHash: string): Promise<void> {
      await db.update(users).set({ passwordHash }).where(eq(users.id, id))
    },

    async setRole (email: string, role: Role): Promise<PublicUser | undefined> {
      const [row] = await db.update(users).set({ role }).where(eq(users.email, email)).returning(publicColumns)
      return row
    },

    /**
     * The listing as JSON text in batches of `size` rows, ordered by id, each batch one string
     * of comma-separated objects. Keyset pages hold no connection or transaction between
     * batches, so a slow reader never pins a pooled connection.
     */
    async * listJsonBatches (size = 5000): AsyncGenerator<string> {
      let after = 0
      for (;;) {
        const [batch] = await listBatch.execute({ after, size })
        if (!batch?.json || batch.last === null) return
        yield batch.json
        after = Number(batch.last)
      }
    }
  }

  async function duplicatedFields (user: NewUser, constraint: string): Promise<DuplicateUserError['fields']> {
    const fields: DuplicateUserError['fields'] = {}
    for (const row of await conflicts.execute({ email: user.email, username: user.username })) {
      if (row.email === user.email) fields.email = messages.duplicate.email
      if (row.username.toLowerCase() === user.username.toLowerCase()) fields.username = messages.duplicate.username
    }
    // The other account may have gone already; the violated index still names the field.
    if (!fields.email && !fields.username) {
      fields[constraint.includes('email') ? 'email' : 'username'] = messages.duplicate[constraint.includes('email') ? 'email' : 'username']
    }
    return fields
  }
}

export type UsersRepository = ReturnType<typeof createUsersRepository>
