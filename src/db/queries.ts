import { gt, sql } from 'drizzle-orm'
import type { AppDatabase } from './database.js'
import { users } from './schema.js'

/**
 * The statements both drivers share, built once with Drizzle; each driver runs them its own
 * way (postgres.js in raw mode, PGlite through Drizzle).
 */
export function sharedQueries (db: AppDatabase) {
  // PostgreSQL writes each page's JSON itself, so rows never become JS objects.
  const page = db.select({
    id: users.id,
    json: sql<string>`json_build_object('id', ${users.id}, 'username', ${users.username}, 'email', ${users.email}, 'role', ${users.role})::text`.as('json')
  }).from(users).where(gt(users.id, sql.placeholder('after'))).orderBy(users.id).limit(sql.placeholder('size')).as('page')
  const userJsonPage = db.select({ json: sql<string | null>`string_agg(${page.json}, ',' order by ${page.id})`, last: sql<number | null>`max(${page.id})` })
    .from(page)
  return { userJsonPage }
}

/** Drizzle's record of applied migrations (readiness compares it with drizzle/'s journal). */
export const MIGRATION_STATE_SQL = 'select count(*)::int as applied, coalesce(max(created_at), 0)::text as latest from drizzle.__drizzle_migrations'
