import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { gt, is, Placeholder, sql } from 'drizzle-orm'
import type { AppDatabase } from '../db/client.js'
import { users } from '../db/schema.js'

/** Rows per keyset page of the admin listing: about 0.5 MB of JSON, one short query each. */
export const LISTING_PAGE_SIZE = 5000

/**
 * Off-heap bytes (Buffers) above which the listing asks V8 for a collection after a page.
 * postgres.js copies every large message once (it concatenates the socket's chunks), so each
 * byte listed leaves about two bytes of dead Buffers, and V8 only collects on its own once
 * off-heap memory has grown by 64 MB: a million users would swell the process by ~60 MB.
 * So after a page the listing forces a full collection once dead Buffers pass 16 MB: about
 * every 8 MB listed, ~20 ms each on a 20 MB heap (≈8% of a million-user listing's time).
 * The limit is process-wide, so concurrent listings share it.
 */
const OFF_HEAP_LIMIT = 16 * 1024 * 1024
let collectGarbage: (() => void) | undefined
// Dead bytes are estimated from the pages listed (about twice their size, see above), not read
// from process.memoryUsage(): that call also reads the RSS from /proc (13% of the CPU at 32
// concurrent listings), and its arrayBuffers count includes the pages still in flight, which
// made every page of concurrent listings force a collection (65% of the CPU in GC).
let deadBytes = 0

function releaseDeadBuffers (pageBytes: number): void {
  deadBytes += 2 * pageBytes
  if (deadBytes < OFF_HEAP_LIMIT) return
  deadBytes = 0
  if (!collectGarbage) {
    // Reaches gc() without starting node with --expose-gc: the flag exposes it to new contexts.
    setFlagsFromString('--expose-gc')
    collectGarbage = runInNewContext('gc') as () => void
  }
  collectGarbage()
}

/** The one postgres.js call used here: a query whose rows come back as raw Buffers. */
interface PostgresJsClient {
  unsafe (query: string, params: unknown[], options: { prepare: boolean }): { raw (): Promise<Array<Array<Buffer | null>>> }
}

function postgresJsClient (db: AppDatabase): PostgresJsClient | undefined {
  const client = (db as { $client?: unknown }).$client as { unsafe?: unknown, begin?: unknown } | undefined
  return typeof client?.unsafe === 'function' && typeof client.begin === 'function' ? client as unknown as PostgresJsClient : undefined
}

/**
 * The admin listing as JSON text, a page at a time, ordered by id: each page is one string of
 * comma-separated `{ id, username, email, role }` objects that PostgreSQL writes itself, so
 * rows never become JS objects.
 *
 * Keyset pages (`id > last seen`), not a cursor: a cursor holds a pooled connection and an
 * open transaction for as long as the client takes to read, which a slow client would stretch
 * past idle_in_transaction_session_timeout; between two pages nothing is held. The price: the
 * listing is not one snapshot (a user created meanwhile may appear at the end).
 *
 * On postgres.js each page arrives as a Buffer (raw mode) and goes to the socket as is. As a JS
 * string, a 0.5 MB page lands in V8's large-object space, which only a full GC frees: listing
 * 10^6 users grew the heap by about 90 MB that way. Buffers live outside the heap and go at
 * the next scavenge.
 */
export function createUsersListing (db: AppDatabase) {
  const page = db.select({
    id: users.id,
    json: sql<string>`json_build_object('id', ${users.id}, 'username', ${users.username}, 'email', ${users.email}, 'role', ${users.role})::text`.as('json')
  }).from(users).where(gt(users.id, sql.placeholder('after'))).orderBy(users.id).limit(sql.placeholder('size')).as('page')
  const batch = db.select({ json: sql<string | null>`string_agg(${page.json}, ',' order by ${page.id})`, last: sql<number | null>`max(${page.id})` })
    .from(page)
  const prepared = batch.prepare('users_list_batch')

  const client = postgresJsClient(db)
  const statement = batch.toSQL()

  async function fetchPage (after: number, size: number): Promise<{ json: string | Buffer, last: number } | undefined> {
    if (client) {
      const values: Record<string, number> = { after, size }
      const params = statement.params.map((param) => is(param, Placeholder) ? values[param.name] : param)
      const [row] = await client.unsafe(statement.sql, params, { prepare: true }).raw()
      const [json, last] = row ?? []
      return json && last ? { json, last: Number(last.toString('latin1')) } : undefined
    }
    const [row] = await prepared.execute({ after, size })
    return row?.json && row.last !== null ? { json: row.json, last: Number(row.last) } : undefined
  }

  return {
    async * listJsonBatches (size = LISTING_PAGE_SIZE): AsyncGenerator<string | Buffer> {
      let after = 0
      for (;;) {
        const next = await fetchPage(after, size)
        if (!next) return
        yield next.json
        after = next.last
        if (typeof next.json !== 'string') releaseDeadBuffers(next.json.length)
      }
    }
  }
}
