import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { asc, inArray, sql } from 'drizzle-orm'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { users } from '../../src/db/schema.js'
import type { App } from '../../src/app.js'
import { usersJsonStream } from '../../src/users/users-listing.js'
import { newUserRow } from '../../src/users/users-repository.js'
import { build, login, seedAccounts, testDatabases } from '../helper.js'

const { admin, user } = seedAccounts
// Several databases of 12,000 users each: slow on a busy machine.
t.setTimeout(300_000)
// More than two pages of the listing's 5000-row keyset pages, and not a multiple of 5000.
const EXTRA_USERS = 12_345

/** Inserts `count` users straight into the table in one statement, with a fake hash: nothing here logs in. */
async function insertUsers (app: App, count: number, prefix = 'bulk'): Promise<void> {
  await app.database.db.execute(sql`
    insert into users (username, email, password_hash, role)
    select ${prefix}::text || n, ${prefix}::text || '.' || n || '@example.com', 'not-a-real-hash', case when n % 7 = 0 then 'ROLE_ADMIN' else 'ROLE_USER' end
    from generate_series(0, ${count - 1}::int) as n`)
}

/** Every user as the listing must show it, read through Drizzle. */
const expectedListing = (app: App) => app.database.db
  .select({ id: users.id, username: users.username, email: users.email, role: users.role }).from(users).orderBy(asc(users.id))

const seedListing = [
  { id: admin.id, username: admin.username, email: admin.email, role: admin.role },
  { id: user.id, username: user.username, email: user.email, role: user.role }
]

for (const kind of testDatabases()) {
  t.test(`GET /admin/users on ${kind}`, async (t) => {
    /** An app on its own database: a case that adds rows or listens gets its own. */
    async function setup (t: Test) {
      const app = await build(t, kind)
      const token = await login(app, admin.email, admin.password)
      const list = () => app.inject({ method: 'GET', url: '/admin/users', headers: { authorization: `Bearer ${token}` } })
      return { app, token, list }
    }

    /** The seed accounts plus EXTRA_USERS, with gaps in the ids, also right at a page boundary. */
    async function populate (app: App): Promise<void> {
      await insertUsers(app, EXTRA_USERS)
      await app.database.db.delete(users).where(inArray(users.username, ['bulk10', 'bulk4997', 'bulk4998', 'bulk9998']))
    }

    // Cases that only read share these two, which no case changes: the seed accounts alone, and many users.
    const seeded = await setup(t)
    const populated = await setup(t)
    await populate(populated.app)

    t.test('two users: exactly the seed accounts, ordered by id, four fields each', async (t) => {
      const { list } = seeded
      const response = await list()
      t.equal(response.statusCode, 200)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
      t.equal(response.headers['cache-control'], 'no-store')
      t.equal(response.headers['x-content-type-options'], 'nosniff')
      t.strictSame(response.json(), seedListing)
      // The listing takes no body: a Content-Type sent with none (some clients send one on every request) changes nothing.
      const typed = await seeded.app.inject({ method: 'GET', url: '/admin/users', headers: { authorization: `Bearer ${seeded.token}`, 'content-type': 'text/plain' } })
      t.strictSame([typed.statusCode, typed.json()], [200, seedListing], 'Content-Type: text/plain, no body')
    })

    t.test('HEAD answers the headers without running the listing', async (t) => {
      const { app, token } = seeded
      const original = app.database.copyUserPage
      let calls = 0
      app.database.copyUserPage = (page, onText) => { calls++; return original(page, onText) }
      t.teardown(() => { app.database.copyUserPage = original })
      const response = await app.inject({ method: 'HEAD', url: '/admin/users', headers: { authorization: `Bearer ${token}` } })
      t.equal(response.statusCode, 200)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
      t.equal(response.body, '')
      t.equal(calls, 0)
      const anonymous = await app.inject({ method: 'HEAD', url: '/admin/users' })
      t.equal(anonymous.statusCode, 401)
      t.equal(anonymous.headers['www-authenticate'], 'Bearer')
      t.equal(anonymous.body, '', 'a HEAD answer has no body')
    })

    t.test('text that JSON must escape comes out intact, byte for byte as JSON.stringify writes it', async (t) => {
      const { app, list } = await setup(t)
      // Sign-up refuses control characters in usernames; older rows or other writers may hold them.
      const odd = [
        { username: 'Zoë "quoted"', email: 'zoe+tag@example.com' },
        { username: 'back\\slash/ü😀', email: 'o\'brien@example.com' },
        { username: 'tab\there\nnew\r\b\f', email: 'ctl@example.com' },
        { username: 'v\u000bx\u0001\u001f\u007f\u2028\u2029', email: 'sep@example.com' },
        { username: '\\N \\v \\\\ "\\"', email: 'esc@example.com' }
      ]
      const inserted = await app.database.db.insert(users).values(odd.map((row) => newUserRow({ ...row, passwordHash: 'x' }))).returning({ id: users.id })
      const response = await list()
      t.equal(response.statusCode, 200)
      const expected = [...seedListing, ...odd.map((row, i) => ({ id: inserted[i].id, ...row, role: 'ROLE_USER' }))]
      t.equal(response.body, JSON.stringify(expected))
      t.strictSame(response.json(), expected)
    })

    t.test(`${EXTRA_USERS + 2} users: several pages, complete, ordered by id, no other field`, async (t) => {
      const { app, list } = populated
      const response = await list()
      t.equal(response.statusCode, 200)
      const body = response.json() as Array<Record<string, unknown>>
      const expected = await expectedListing(app)
      t.equal(body.length, EXTRA_USERS + 2 - 4)
      t.ok(body.every((row) => Object.keys(row).join() === 'id,username,email,role'), 'exactly id, username, email, role, in that order')
      t.ok(body.every((row, i) => i === 0 || (row.id as number) > (body[i - 1].id as number)), 'ids strictly increasing')
      t.strictSame(body.slice(0, 2), seedListing)
      t.strictSame(body, expected)
    })

    t.test('the database\'s pages join into the same listing at any page size', async (t) => {
      const { app } = populated
      const expected = await expectedListing(app)
      t.equal(expected.length, EXTRA_USERS + 2 - 4)
      for (const size of [997, 4999, 5000, 12_343, 100_000]) {
        let pages = 0
        const counted = { ...app.database, copyUserPage: (...args: Parameters<typeof app.database.copyUserPage>) => { pages++; return app.database.copyUserPage(...args) } }
        const chunks: Buffer[] = []
        for await (const chunk of await usersJsonStream(counted, size)) chunks.push(chunk)
        t.strictSame(JSON.parse(Buffer.concat(chunks).toString('utf8')), expected, `size ${size}`)
        // A short page ends the listing; only a listing that fills its last page asks once more.
        t.equal(pages, Math.floor(expected.length / size) + 1, `size ${size}: number of pages`)
      }
    })

    t.test('a client that disconnects mid-listing stops the listing and leaks nothing', async (t) => {
      const { app, token } = await setup(t)
      await populate(app)
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as AddressInfo

      // Spy on the pages, slowed down as a slow database would be, to see where the listing stops.
      const original = app.database.copyUserPage
      const total = Math.ceil((await expectedListing(app)).length / 5000)
      const seen = { pages: 0 }
      app.database.copyUserPage = async (page, onText) => {
        seen.pages++
        await delay(100)
        return original(page, onText)
      }
      t.teardown(() => { app.database.copyUserPage = original })

      const firstChunk = await new Promise<string>((resolve, reject) => {
        const req = httpRequest({ port, host: '127.0.0.1', path: '/admin/users', headers: { authorization: `Bearer ${token}` } }, (res) => {
          res.once('data', (chunk: Buffer) => {
            // Drop the connection as soon as the listing has started.
            req.destroy()
            resolve(chunk.toString('utf8', 0, 1))
          })
        })
        req.on('error', () => {})
        req.once('error', reject)
        req.end()
      })
      t.equal(firstChunk, '[')
      // Once the socket is gone no further page is asked for.
      await delay(300)
      const asked = seen.pages
      await delay(500)
      t.equal(seen.pages, asked, 'no page asked for after the disconnect')
      t.ok(seen.pages < total, `stopped after ${seen.pages} of ${total} pages`)
      app.database.copyUserPage = original

      // The app still answers, and the whole listing still comes out, twenty times in a row.
      const expected = await expectedListing(app)
      for (let i = 0; i < 20; i++) {
        const response = await fetch(`http://127.0.0.1:${port}/admin/users`, { headers: { authorization: `Bearer ${token}` } })
        t.equal(response.status, 200)
        const body = await response.json() as unknown[]
        if (i === 0 || i === 19) t.strictSame(body, expected, `request ${i + 1}: complete`)
        else t.equal(body.length, expected.length, `request ${i + 1}: complete`)
      }
    })

    t.test('a database failure after the first page cuts the answer short at once; the next listing is whole', async (t) => {
      const { app, token, list } = await setup(t)
      await populate(app)
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as AddressInfo
      const original = app.database.copyUserPage
      let pages = 0
      app.database.copyUserPage = async (page, onText) => {
        if (++pages === 2) throw Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' })
        return original(page, onText)
      }
      t.teardown(() => { app.database.copyUserPage = original })

      const cut = await new Promise<{ status?: number, complete: boolean, body: string }>((resolve) => {
        const req = httpRequest({ port, host: '127.0.0.1', path: '/admin/users', headers: { authorization: `Bearer ${token}` } }, (res) => {
          let body = ''
          res.on('data', (chunk: Buffer) => { body += chunk.toString('utf8') })
          res.on('error', () => {})
          res.on('close', () => resolve({ status: res.statusCode, complete: res.complete, body }))
        })
        req.on('error', () => {})
        req.end()
      })
      // The status was sent with the first page; the truncated body must not pass for a whole listing.
      t.equal(cut.status, 200)
      t.equal(cut.complete, false, 'the response ends without its last chunk')
      t.ok(cut.body.startsWith('[{"id":'), 'the first page was sent')
      t.throws(() => JSON.parse(cut.body), SyntaxError, 'what arrived is not a JSON listing')
      t.equal(pages, 2, 'no page asked for after the failure')

      app.database.copyUserPage = original
      const listing = await list()
      t.equal(listing.statusCode, 200)
      t.strictSame(listing.json(), await expectedListing(app))
    })

    t.test('disconnects without any slowing down, many at once: the app and its pool stay healthy', async (t) => {
      const { app, token, list } = await setup(t)
      await populate(app)
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as AddressInfo
      await Promise.all(Array.from({ length: 15 }, () => new Promise<void>((resolve) => {
        const req = httpRequest({ port, host: '127.0.0.1', path: '/admin/users', headers: { authorization: `Bearer ${token}` } }, (res) => {
          res.once('data', () => { req.destroy(); resolve() })
        })
        req.on('error', () => resolve())
        req.end()
      })))
      await delay(200)
      const responses = await Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })))
      t.strictSame(responses.map((r) => r.statusCode), Array(20).fill(403), '20 requests answered (an admin token on /users/me)')
      t.strictSame(responses.map((r) => r.json()), Array(20).fill({ statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' }))
      const listing = await list()
      t.equal(listing.statusCode, 200)
      t.strictSame(listing.json(), await expectedListing(app))

      const url = app.testDatabase.url
      if (!url) return
      // Nothing of ours is left running or idle inside a transaction on the server.
      const probe = postgres(url, { max: 1, onnotice: () => {} })
      t.teardown(() => probe.end())
      const stuck = await probe`
        select state, query from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and state is not null and state <> 'idle'`
      t.strictSame([...stuck], [], 'no active or idle-in-transaction session')
    })
  })
}
