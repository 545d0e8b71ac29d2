import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { Database } from '../db/database.js'

/** Rows per keyset page of the admin listing: about 0.5 MB of JSON, one short query each. */
export const LISTING_PAGE_SIZE = 5000

/**
 * Off-heap bytes (Buffers) above which the listing asks V8 for a collection after a page.
 * postgres.js copies every large message once, so each byte listed leaves about two bytes of
 * dead Buffers, and V8 only collects on its own once off-heap memory has grown by 64 MB.
 * Process-wide, so concurrent listings share it.
 */
const OFF_HEAP_LIMIT = 16 * 1024 * 1024
let collectGarbage: (() => void) | undefined
// Estimated from the pages listed rather than read from process.memoryUsage(), which is costly
// and counts the pages still in flight (BENCHMARKS.md).
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

/**
 * The admin listing as JSON text, a page at a time, ordered by id.
 *
 * Keyset pages (`id > last seen`), not a cursor: a cursor holds a pooled connection and an
 * open transaction for as long as the client takes to read, which a slow client would stretch
 * past idle_in_transaction_session_timeout; between two pages nothing is held. The price: the
 * listing is not one snapshot (a user created meanwhile may appear at the end).
 */
export async function * listUsersJson (database: Database, size = LISTING_PAGE_SIZE): AsyncGenerator<string | Buffer> {
  let after = 0
  for (;;) {
    const page = await database.userJsonPage(after, size)
    if (!page) return
    yield page.json
    after = page.last
    if (typeof page.json !== 'string') releaseDeadBuffers(page.json.length)
  }
}
