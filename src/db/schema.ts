import { sql } from 'drizzle-orm'
import { check, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core'
import { DEFAULT_ROLE, ROLES, type Role } from '../schemas/roles.js'
import { USERNAME_LENGTH } from '../schemas/user-rules.js'

export const users = pgTable('users', {
  id: integer().primaryKey().generatedAlwaysAsIdentity(),
  username: text().notNull(),
  // Usernames are unique by this key (src/users/user.ts), which the service computes and sends;
  // migration 0002's trigger fills it only for writers that do not (the previous release).
  usernameKey: text('username_key').notNull().unique('users_username_key_unique'),
  email: text().notNull().unique('users_email_unique'),
  passwordHash: text('password_hash').notNull(),
  role: text().$type<Role>().notNull().default(DEFAULT_ROLE),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow()
}, (t) => [
  // Sign-up and the CLI lower-case e-mails; the constraint keeps any other writer honest.
  check('users_email_lower_check', sql`${t.email} = lower(${t.email})`),
  check('users_role_check', sql`${t.role} in (${sql.raw(ROLES.map((role) => `'${role}'`).join(', '))})`),
  check('users_username_length_check', sql`char_length(${t.username}) between ${sql.raw(String(USERNAME_LENGTH.minimum))} and ${sql.raw(String(USERNAME_LENGTH.maximum))}`)
])

export type UserRow = typeof users.$inferSelect
/** A user as the service shows it: never the password hash or the username key. */
export type PublicUser = Pick<UserRow, 'id' | 'username' | 'email' | 'role'>

/**
 * CONTRACT §9's familiar addresses: where each account logged in successfully (the client
 * address as the limits count it, IPv6 per /64), and when last. Rows older than 30 days no
 * longer count, and go at that account's next login; they go with the account too.
 */
export const familiarAddresses = pgTable('familiar_addresses', {
  userId: integer('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  address: text().notNull(),
  lastSeen: timestamp('last_seen', { withTimezone: true }).notNull().defaultNow()
}, (t) => [primaryKey({ name: 'familiar_addresses_pkey', columns: [t.userId, t.address] })])
