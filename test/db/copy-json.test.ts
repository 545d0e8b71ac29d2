import t from 'tap'
import fc from 'fast-check'
import { createCopyJsonWriter } from '../../src/db/copy-json.js'
import { LISTING_FIELDS } from '../../src/users/users-listing.js'

interface Listed { id: number, username: string, email: string, role: string }

/** A field as PostgreSQL's COPY TO writes it in text format (CopyAttributeOutText, tab delimiter). */
function copyField (value: string): string {
  const letters: Record<string, string> = { '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't', '\v': 'v', '\\': '\\' }
  return value.replace(/[\b\f\n\r\t\v\\]/g, (char) => `\\${letters[char]}`)
}
const copyLine = (row: Listed) => `${row.id}\t${copyField(row.username)}\t${copyField(row.email)}\t${copyField(row.role)}\n`

/** Writes `pieces` of COPY text and returns the page's JSON and what the writer counted. */
function convert (pieces: string[], options?: { continues: boolean }) {
  const chunks: Buffer[] = []
  const writer = createCopyJsonWriter(LISTING_FIELDS, (chunk) => chunks.push(chunk), options)
  for (const piece of pieces) writer.write(Buffer.from(piece, 'utf8'))
  const page = writer.end()
  return { json: Buffer.concat(chunks).toString('utf8'), rows: page.rows, lastId: page.lastId, chunks }
}

/** What the listing must be: JSON.stringify of the row objects, without the array's brackets. */
const expected = (rows: Listed[]) => JSON.stringify(rows).slice(1, -1)

t.test('no COPY text is an empty page', async (t) => {
  t.strictSame(convert([]), { json: '', rows: 0, lastId: 0, chunks: [] })
})

t.test('COPY rows become the listing objects, comma-separated, with the last id', async (t) => {
  const { json, rows, lastId } = convert(['1\tana\tana@example.com\tROLE_ADMIN\n', '20\tNúñez 😀\tn@example.com\tROLE_USER\n'])
  t.equal(json, '{"id":1,"username":"ana","email":"ana@example.com","role":"ROLE_ADMIN"},{"id":20,"username":"Núñez 😀","email":"n@example.com","role":"ROLE_USER"}')
  t.equal(rows, 2)
  t.equal(lastId, 20)
})

t.test('a page that continues a listing starts with a comma; an empty one writes nothing', async (t) => {
  t.strictSame(convert(['7\tana\ta@example.com\tROLE_USER\n'], { continues: true }).json, ',{"id":7,"username":"ana","email":"a@example.com","role":"ROLE_USER"}')
  t.strictSame(convert([], { continues: true }), { json: '', rows: 0, lastId: 0, chunks: [] })
})

t.test('COPY\'s escapes and bare bytes are written as JSON.stringify does', async (t) => {
  const rows: Listed[] = [
    { id: 2, username: 'say "hi"\\', email: 'b@example.com', role: 'ROLE_USER' },
    { id: 3, username: 'tab\there\u0001\u001f\u007f\u2028', email: 'c@example.com', role: 'ROLE_USER' },
    { id: 4, username: 'last\nline\r\b\f\v', email: 'd"@example.com', role: 'ROLE_USER' }
  ]
  const { json } = convert([rows.map(copyLine).join('')])
  t.equal(json, '{"id":2,"username":"say \\"hi\\"\\\\","email":"b@example.com","role":"ROLE_USER"},' +
    '{"id":3,"username":"tab\\there\\u0001\\u001f\u007f\u2028","email":"c@example.com","role":"ROLE_USER"},' +
    '{"id":4,"username":"last\\nline\\r\\b\\f\\u000b","email":"d\\"@example.com","role":"ROLE_USER"}')
  t.equal(json, expected(rows))
})

t.test('a page larger than a chunk is handed over as each chunk fills, split between rows', async (t) => {
  const rows = Array.from({ length: 3000 }, (_, i) => ({ id: i + 1, username: `user${i}`, email: `user${i}@example.com`, role: 'ROLE_USER' }))
  const page = convert(rows.map(copyLine))
  t.equal(page.json, expected(rows))
  t.ok(page.chunks.length > 1, `${page.chunks.length} chunks`)
  for (const chunk of page.chunks) {
    const text = chunk.toString('utf8')
    t.ok(/^,?\{"id":\d+,.*"\}$/.test(text) && !text.includes('}{'), 'each chunk holds whole rows')
  }
})

// Any text PostgreSQL can store: every code point but NUL and the surrogates.
const anyText = fc.oneof(
  fc.string({ unit: fc.integer({ min: 1, max: 0x10ffff }).filter((cp) => cp < 0xd800 || cp > 0xdfff).map((cp) => String.fromCodePoint(cp)), maxLength: 30 }),
  fc.string({ unit: fc.constantFrom('\\', '"', '\t', '\n', '\r', '\b', '\f', '\v', '\u0001', '\u001f', 'N', 'v', '.'), maxLength: 12 }),
  fc.constantFrom('ROLE_USER', 'ROLE_ADMIN')
)
const row = fc.record({ id: fc.integer({ min: 1, max: 2_147_483_647 }), username: anyText, email: anyText, role: anyText })

t.test('any page, in any pieces of whole lines, is byte for byte JSON.stringify of its objects', async (t) => {
  fc.assert(fc.property(fc.array(row, { maxLength: 20 }), fc.integer({ min: 1, max: 5 }), (rows, perPiece) => {
    const lines = rows.map(copyLine)
    const pieces = Array.from({ length: Math.ceil(lines.length / perPiece) }, (_, i) => lines.slice(i * perPiece, (i + 1) * perPiece).join(''))
    const page = convert(pieces)
    t.equal(page.json, expected(rows))
    t.equal(page.rows, rows.length)
    t.equal(page.lastId, rows.at(-1)?.id ?? 0)
  }), { numRuns: 1000 })
})

t.test('the fields come from the caller: bare integers, quoted strings, any order after the id', async (t) => {
  const chunks: Buffer[] = []
  const writer = createCopyJsonWriter([{ name: 'id', kind: 'integer' }, { name: 'count', kind: 'integer' }, { name: 'note', kind: 'string' }], (chunk) => chunks.push(chunk))
  writer.write(Buffer.from('7\t12\ta "b"\n'))
  t.strictSame(writer.end(), { rows: 1, lastId: 7 })
  t.strictSame(JSON.parse(`[${Buffer.concat(chunks).toString()}]`), [{ id: 7, count: 12, note: 'a "b"' }])
  t.throws(() => createCopyJsonWriter([{ name: 'username', kind: 'string' }], () => {}), { message: 'the first field must be the integer id the pages are keyed by' })
})
