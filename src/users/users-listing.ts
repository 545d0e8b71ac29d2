import { Readable } from 'node:stream'
import type { Database } from '../db/database.js'
import { createCopyJsonWriter, type CopyField } from '../db/copy-json.js'
import type { PublicColumn } from '../db/queries.js'
import { inStatementSpan } from '../telemetry/spans.js'
import { UserRecord } from '../schemas/users.js'

/**
 * What each listed user holds: the fields of the UserRecord schema, in its order, so that the
 * listing's JSON cannot drift from the schema that documents it and serializes the other routes.
 */
export const LISTING_FIELDS: readonly CopyField[] = Object.entries(UserRecord.properties)
  .map(([name, schema]) => ({ name, kind: schema.type === 'integer' ? 'integer' : 'string' }))
const columns = LISTING_FIELDS.map((field) => field.name as PublicColumn)

/** Rows per keyset page of the admin listing: one short COPY each. */
const LISTING_PAGE_SIZE = 5000

/**
 * The admin listing as a stream of its JSON text, ordered by id; resolves once the first page
 * is in, so that a database outage is still a clean 503 before any byte is sent.
 *
 * Keyset pages (`id > last seen`), not a cursor: a cursor holds a pooled connection and an
 * open transaction for as long as the client takes to read, which a slow client would stretch
 * past idle_in_transaction_session_timeout; between two pages nothing is held. The price: the
 * listing is not one snapshot (a user created meanwhile may appear at the end).
 *
 * A page's chunks are pushed as they fill; the next page is asked for only when the stream
 * wants more, so at most a page waits for a slow client. Once the stream is destroyed (the
 * client went away), no page is asked for.
 */
export async function usersJsonStream (database: Database, size = LISTING_PAGE_SIZE): Promise<Readable> {
  // The last id listed; 0 before the first page (ids start at 1).
  let after = 0
  let more = true
  let fetching = false
  // The stream asked for data (read) and nothing was pushed since: it will not ask again until something is.
  let wanted = false
  const stream = new Readable({ read () { wanted = true; fetchNext() } })
  const push = (chunk: Buffer | string | null) => {
    wanted = false
    if (!stream.destroyed) stream.push(chunk)
  }

  async function fetchPage (): Promise<void> {
    fetching = true
    try {
      const writer = createCopyJsonWriter(LISTING_FIELDS, push, { continues: after > 0 })
      await inStatementSpan('COPY', 'users_copy_page', () => database.copyUserPage({ columns, after, size }, writer.write))
      const page = writer.end()
      after = page.lastId
      // A short page is the last: no query to learn that the next one is empty.
      more = page.rows === size
    } finally {
      fetching = false
    }
  }

  function fetchNext (): void {
    if (fetching || stream.destroyed) return
    if (!more) {
      push(']')
      push(null)
      return
    }
    fetchPage().then(() => { if (wanted) fetchNext() }, (error) => stream.destroy(error))
  }

  push('[')
  await fetchPage()
  return stream
}
