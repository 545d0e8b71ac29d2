import t, { type Test } from 'tap'
import fc from 'fast-check'
import { userListJson, type UserRow } from '../../src/users/user-json.js'

/** A cell as postgres.js's raw mode gives it: a slice of a larger message buffer. */
function rawCell (text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8')
  return Buffer.concat([Buffer.from('D\u0000\u0000'), bytes, Buffer.from('"\\\n')]).subarray(3, 3 + bytes.length)
}
const raw = (id: number, username: string, email: string, role: string): UserRow => [rawCell(String(id)), rawCell(username), rawCell(email), rawCell(role)]
const text = (cell: UserRow[number]) => typeof cell === 'object' ? cell.toString('utf8') : cell

/** What the listing must be: JSON.stringify of the row objects, without the array's brackets. */
function expected (rows: readonly UserRow[]): string {
  return JSON.stringify(rows.map(([id, username, email, role]) => ({ id: Number(text(id)), username: text(username), email: text(email), role: text(role) }))).slice(1, -1)
}

/** The page is one Buffer of exactly its size, not a slice of a larger allocation. */
function exact (t: Test, out: Buffer) {
  t.equal(out.byteOffset, 0)
  t.equal(out.buffer.byteLength, out.length)
}

t.test('an empty page is empty', async (t) => {
  const out = userListJson([])
  t.equal(out.toString('utf8'), '')
  t.equal(out.length, 0)
})

t.test('raw postgres.js rows become the listing objects, comma-separated', async (t) => {
  const out = userListJson([raw(1, 'ana', 'ana@example.com', 'ROLE_ADMIN'), raw(20, 'Núñez 😀', 'n@example.com', 'ROLE_USER')])
  t.equal(out.toString('utf8'), '{"id":1,"username":"ana","email":"ana@example.com","role":"ROLE_ADMIN"},{"id":20,"username":"Núñez 😀","email":"n@example.com","role":"ROLE_USER"}')
  exact(t, out)
})

t.test('PGlite rows (numbers and strings) give the same text', async (t) => {
  const out = userListJson([[1, 'ana', 'ana@example.com', 'ROLE_ADMIN'], ['20', 'Núñez 😀', 'n@example.com', 'ROLE_USER']])
  t.equal(out.toString('utf8'), '{"id":1,"username":"ana","email":"ana@example.com","role":"ROLE_ADMIN"},{"id":20,"username":"Núñez 😀","email":"n@example.com","role":"ROLE_USER"}')
  exact(t, out)
})

t.test('quotes, backslashes and control characters are escaped as JSON.stringify does', async (t) => {
  const rows: UserRow[] = [
    raw(1, 'plain', 'a@example.com', 'ROLE_USER'),
    raw(2, 'say "hi"\\', 'b@example.com', 'ROLE_USER'),
    [3, 'tab\there\u0000\u001f\u007f\u2028', 'c@example.com', 'ROLE_USER'],
    raw(4, 'last\nline\r\b\f', 'd"@example.com', 'ROLE_USER')
  ]
  const out = userListJson(rows)
  t.equal(out.toString('utf8'), '{"id":1,"username":"plain","email":"a@example.com","role":"ROLE_USER"},' +
    '{"id":2,"username":"say \\"hi\\"\\\\","email":"b@example.com","role":"ROLE_USER"},' +
    '{"id":3,"username":"tab\\there\\u0000\\u001f\u007f\u2028","email":"c@example.com","role":"ROLE_USER"},' +
    '{"id":4,"username":"last\\nline\\r\\b\\f","email":"d\\"@example.com","role":"ROLE_USER"}')
  t.equal(out.toString('utf8'), expected(rows))
  exact(t, out)
})

t.test('a JS string with a lone surrogate is escaped; a pair is written as is', async (t) => {
  const out = userListJson([[7, 'a\ud800b', '\udc00@example.com', 'ROLE_USER'], [8, 'pair 😀', 'x@example.com', 'ROLE_USER']])
  t.equal(out.toString('utf8'), '{"id":7,"username":"a\\ud800b","email":"\\udc00@example.com","role":"ROLE_USER"},{"id":8,"username":"pair 😀","email":"x@example.com","role":"ROLE_USER"}')
})

// Any UTF-16 code unit, lone surrogates included; Buffers carry its UTF-8 (a lone surrogate becomes U+FFFD).
const anyText = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)), maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', '"', '\\', '\u0000', 'ROLE_USER', 'ROLE_ADMIN')
)
const id = fc.integer({ min: 1, max: 2_147_483_647 })
const cell = (value: fc.Arbitrary<string>) => fc.tuple(value, fc.boolean()).map(([v, asBuffer]) => asBuffer ? rawCell(v) : v)
const idCell = fc.tuple(id, fc.constantFrom('buffer', 'number', 'string')).map(([n, kind]) => kind === 'buffer' ? rawCell(String(n)) : kind === 'number' ? n : String(n))
const row = fc.tuple(idCell, cell(anyText), cell(anyText), cell(anyText)) as fc.Arbitrary<UserRow>

t.test('any page is byte for byte JSON.stringify of its objects', async (t) => {
  fc.assert(fc.property(fc.array(row, { maxLength: 20 }), (rows) => {
    const out = userListJson(rows)
    t.equal(out.toString('utf8'), expected(rows))
    t.equal(out.buffer.byteLength, out.length)
  }), { numRuns: 1000 })
})
