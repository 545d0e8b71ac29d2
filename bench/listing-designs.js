// Designs of GET /admin/users compared by bench/compare-listings.js (issue 13), each served by
// bench/db-ceiling.js with LISTING_DESIGN=<name> after the same token check and look-up.
// Paged designs stream as the service does: '[' then pages joined by ',' then ']', through
// Readable.from(generator), which asks for the next page once the socket took the last one.
// They use the built service's modules (npm run build).
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { connectPostgres } from '../dist/db/postgres.js'
import { usersJsonStream } from '../dist/users/users-listing.js'

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
 * The service's former query: PostgreSQL builds each page's JSON (json_build_object +
 * string_agg per keyset page, one Buffer per page), without the forced garbage collection.
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

/**
 * src/users/users-listing.ts as it is, with `size` rows a page: COPY text per keyset page,
 * turned into JSON chunks by src/db/copy-json.ts and streamed as they fill.
 */
const copyPages = (size) => () => {
  const opening = connectPostgres({ url: process.env.DATABASE_URL, poolMax: 10 })
  return async (res) => {
    const body = await usersJsonStream(await opening, size)
    res.writeHead(200, JSON_TYPE)
    await pipeline(body, res)
  }
}

export const designs = {
  'copy-5000': copyPages(5000),
  'copy-1000': copyPages(1000),
  'json-agg-nogc-5000': paged((sql) => jsonAggPages(sql, 5000)),
  'json-agg-nogc-500': paged((sql) => jsonAggPages(sql, 500)),
  'json-agg-text-1000': paged((sql) => jsonAggTextPages(sql, 1000)),
  'objects-5000': paged((sql) => objectPages(sql, 5000))
}
