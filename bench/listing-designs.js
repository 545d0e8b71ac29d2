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

/**
 * Keyset pages of raw rows handed over one by one as postgres.js parses them (forEach) and
 * serialised in batches of `batch` rows: no row outlives its batch, so the socket chunks its
 * cells point into die young, and V8's scavenges free them without a full collection.
 */
function streamedRawPages (sql, size, batch) {
  return async function * () {
    let after = 0
    for (;;) {
      const json = []
      let rows = []
      let count = 0
      await sql`select id, username, email, role from users where id > ${after} order by id limit ${size}`.raw().forEach((row) => {
        rows.push(row)
        if (rows.length < batch) return
        json.push(userListJson(rows))
        after = rows.at(-1)[0]
        count += rows.length
        rows = []
      })
      if (rows.length > 0) {
        json.push(userListJson(rows))
        after = rows.at(-1)[0]
        count += rows.length
      }
      after = typeof after === 'number' ? after : Number(after.toString('latin1'))
      // Each batch is a comma-separated run of objects, as a page is: joined() separates them.
      yield * json
      if (count < size) return
    }
  }
}

/**
 * The service's query (json_build_object + string_agg per keyset page, one Buffer per page)
 * without its forced garbage collection.
 */
function jsonAggPages (sql, size) {
  return async function * () {
    let after = 0
    for (;;) {
      const [[json, last]] = await sql`select string_agg(j, ',' order by id), max(id) from (
        select id, json_build_object('id', id, 'username', username, 'email', email, 'role', role)::text as j
        from users where id > ${after} order by id limit ${size}) as page`.raw()
      if (!json) return
      yield json
      after = Number(last.toString('latin1'))
    }
  }
}

/**
 * The same query with each page as a JS string: a page under about 120 KB (1000 rows) is an
 * ordinary young-generation string, which a scavenge frees, not a large object.
 */
function jsonAggTextPages (sql, size) {
  return async function * () {
    let after = 0
    for (;;) {
      const [{ json, last }] = await sql`select string_agg(j, ',' order by id) as json, max(id) as last from (
        select id, json_build_object('id', id, 'username', username, 'email', email, 'role', role)::text as j
        from users where id > ${after} order by id limit ${size}) as page`
      if (!json) return
      yield json
      after = last
    }
  }
}

const paged = (pages) => (sql) => { const make = pages(sql); return (res) => stream(res, make()) }

export const designs = {
  // src/users/users-listing.ts as it is: json_build_object + string_agg per 5000-row keyset page,
  // and a full collection forced once about 16 MB of dead Buffers have built up.
  'json-agg-5000': (sql) => {
    const listing = createUsersListing(drizzle({ client: sql }))
    return (res) => stream(res, listing.listJsonBatches())
  },
  'json-agg-nogc-5000': paged((sql) => jsonAggPages(sql, 5000)),
  'json-agg-nogc-500': paged((sql) => jsonAggPages(sql, 500)),
  'json-agg-nogc-100': paged((sql) => jsonAggPages(sql, 100)),
  'json-agg-text-1000': paged((sql) => jsonAggTextPages(sql, 1000)),
  'json-agg-text-500': paged((sql) => jsonAggTextPages(sql, 500)),
  'raw-1000': paged((sql) => rawPages(sql, 1000)),
  'raw-5000': paged((sql) => rawPages(sql, 5000)),
  'raw-20000': paged((sql) => rawPages(sql, 20000)),
  'streamed-raw-5000': paged((sql) => streamedRawPages(sql, 5000, 256)),
  'objects-5000': paged((sql) => objectPages(sql, 5000))
}
