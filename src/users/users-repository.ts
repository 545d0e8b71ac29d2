import { eq, sql } from 'drizzle-orm'
import type { AppDatabase } from '../db/client.js'
import { users, type Role } from '../db/schema.js'
import { uniqueViolation } from '../db/errors.js'
import { DuplicateUserError } from '../errors.js'
import { messages } from '../messages.js'
import { createUsersListing } from './users-listing.js'

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

  const listing = createUsersListing(db)

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

    /** The admin listing as JSON text, page by page (see users-listing.ts). */
    listJsonBatches: listing.listJsonBatches
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
