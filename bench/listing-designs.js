// Designs of GET /admin/users compared by bench/compare-listings.js (issue 13), each served by
// bench/db-ceiling.js with LISTING_DESIGN=<name> after the same token check and look-up.
// Paged designs stream as the service does: '[' then pages joined by ',' then ']', through
// Readable.from(generator), which asks for the next page once the socket took the last one.
// They use the built service's modules (npm run build).
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { drizzle } from 'drizzle-orm/postgres-js'
import { createUsersListing } from '../dist/users/users-listing.js'
import { userListJson } from '../dist/users/user-json.js'

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8', 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' }

async function * joined (pages) {
  yield '['
  let first = true
  for await (const page of pages) {
    if (!first) yield ','
    first = false
    yield page
  }
  yield ']'
}

/** Streams the pages; the first one is read before the headers, as the service does. */
async function stream (res, pages) {
  const iterator = pages[Symbol.asyncIterator]()
  const first = await iterator.next()
  res.writeHead(200, JSON_TYPE)
  const rest = { [Symbol.asyncIterator]: () => iterator }
  const all = first.done ? joined([]) : joined((async function * () { yield first.value; yield * rest })())
  await pipeline(Readable.from(all, { objectMode: false }), res)
}

/** Keyset pages of rows as raw Buffers (postgres.js `.raw()`), each turned into JSON bytes. */
function rawPages (sql, size) {
  return async function * () {
    let after = 0
    for (;;) {
      const rows = await sql`select id, username, email, role from users where id > ${after} order by id limit ${size}`.raw()
      if (rows.length === 0) return
      yield userListJson(rows)
      after = Number(rows.at(-1)[0].toString('latin1'))
      if (rows.length < size) return
    }
  }
}

/** Keyset pages of rows as objects, each page JSON.stringify'd (brackets dropped). */
function objectPages (sql, size) {
  return async function * () {
    let after = 0
    for (;;) {
      const rows = await sql`select id, username, email, role from users where id > ${after} order by id limit ${size}`
      if (rows.length === 0) return
      yield JSON.stringify(rows).slice(1, -1)
      after = rows.at(-1).id
      if (rows.length < size) return
    }
  }
}

/** One statement through a cursor, raw rows: holds a pooled connection for the whole listing. */
function cursorPages (sql, size) {
  return async function * () {
    for await (const rows of sql`select id, username, email, role from users order by id`.raw().cursor(size)) yield userListJson(rows)
  }
}

const paged = (pages) => (sql) => { const make = pages(sql); return (res) => stream(res, make()) }

export const designs = {
  // src/users/users-listing.ts as it is: json_build_object + string_agg per 5000-row keyset page.
  'json-agg-5000': (sql) => {
    const listing = createUsersListing(drizzle({ client: sql }))
    return (res) => stream(res, listing.listJsonBatches())
  },
  'raw-1000': paged((sql) => rawPages(sql, 1000)),
  'raw-5000': paged((sql) => rawPages(sql, 5000)),
  'raw-20000': paged((sql) => rawPages(sql, 20000)),
  'objects-5000': paged((sql) => objectPages(sql, 5000)),
  'cursor-raw-5000': paged((sql) => cursorPages(sql, 5000))
}
