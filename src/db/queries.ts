import { gt, sql } from 'drizzle-orm'
import { PgDialect, QueryBuilder } from 'drizzle-orm/pg-core'
import { users } from './schema.js'

const dialect = new PgDialect()
const queryBuilder = new QueryBuilder()

/** The columns a user is shown with: never the password hash or the username key. */
export const publicColumns = { id: users.id, username: users.username, email: users.email, role: users.role }
export type PublicColumn = keyof typeof publicColumns

/** A keyset page of the listing: public columns of the users with an id above `after`. */
export interface CopyPage { readonly columns: readonly PublicColumn[], readonly after: number, readonly size: number }

/**
 * The public columns of the users among `$1`, an integer array: the look-up behind every
 * authenticated request, several requests' ids at once (src/users/users-repository.ts). Drizzle
 * writes the statement once; the drivers run it with the ids as a bind parameter (postgres.js
 * prepares it once a connection) without Drizzle's per-call layers (async wrappers and row
 * mapping), which would run on every authenticated request.
 */
export const USERS_BY_IDS_SQL = dialect.sqlToQuery(queryBuilder.select(publicColumns).from(users)
  .where(sql`${users.id} = any(${sql.placeholder('ids')}::integer[])`).getSQL()).sql

/**
 * `COPY (one keyset page of the listing) TO target`: the public `columns` of the users with an
 * id above `after`, at most `size`, ordered by id, as COPY text (src/db/copy-json.ts turns it into JSON). PostgreSQL
 * writes plain rows at a fraction of the cost of building JSON, and COPY sends each row as
 * one small message that the drivers hand over without parsing its cells. COPY takes no bind
 * parameters, so the two numbers are written into the statement: integers only.
 */
export function userCopyPageSql ({ columns, after, size }: CopyPage, target: 'stdout' | '\'/dev/blob\''): string {
  if (!Number.isSafeInteger(after) || !Number.isSafeInteger(size)) throw new TypeError('listing page bounds must be integers')
  const selected = Object.fromEntries(columns.map((name) => {
    if (!Object.hasOwn(publicColumns, name)) throw new TypeError(`the listing has no public column ${name}`)
    return [name, publicColumns[name]]
  }))
  const page = queryBuilder.select(selected)
    .from(users).where(gt(users.id, after)).orderBy(users.id).limit(size)
  return `copy (${dialect.sqlToQuery(page.getSQL().inlineParams()).sql}) to ${target}`
}

/** Drizzle's record of applied migrations (readiness compares it with drizzle/'s journal). */
export const MIGRATION_STATE_SQL = 'select count(*)::int as applied, coalesce(max(created_at), 0)::text as latest from drizzle.__drizzle_migrations'
