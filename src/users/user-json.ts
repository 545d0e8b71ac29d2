/**
 * One listing row, id, username, email, role: each cell the text-format bytes postgres.js
 * gives in raw mode (valid UTF-8, as the database's encoding is; the id as its digits), or
 * the value PGlite parsed (rowMode 'array').
 */
export type UserRow = readonly [id: Buffer | string | number, username: Buffer | string, email: Buffer | string, role: Buffer | string]

// Bytes JSON.stringify escapes inside a string: control characters, `"` and `\`.
const ESCAPED = new Uint8Array(256)
for (let byte = 0; byte < 0x20; byte++) ESCAPED[byte] = 1
ESCAPED[0x22] = 1
ESCAPED[0x5c] = 1
// The same for a JS string, plus UTF-16 surrogates: well-formed JSON.stringify escapes a lone
// one, and a pair is rare enough to take the slow way too.
const ESCAPED_CHARS = /[\u0000-\u001f"\\\ud800-\udfff]/ // eslint-disable-line no-control-regex

const KEYS = ['{"id":', ',"username":"', '","email":"', '","role":"'].map((key) => Buffer.from(key, 'latin1'))
const ROW_END = Buffer.from('"}', 'latin1')
// Every key, the quotes around the three strings and the closing brace.
const ROW_FIXED_BYTES = KEYS.reduce((total, key) => total + key.length, 0) + ROW_END.length

/** JSON text of the cells that need escaping, without their quotes, keyed by row * 4 + column. */
type EscapedCells = Map<number, string>

/**
 * A page of listing rows as the JSON text of their `{ id, username, email, role }` objects,
 * comma-separated: byte for byte what JSON.stringify writes for those objects, without
 * making an object or a string per row.
 *
 * The result is one exactly sized Buffer, and nothing else of the page's size outlives the
 * call: the cells' bytes are copied as they are. A Buffer lives outside V8's heap and goes at
 * the next scavenge once written, where a 0.5 MB string would sit in the large-object space
 * until a full collection. A cell holding something JSON escapes (`"`, `\`, a control
 * character; in a JS string also a surrogate) is rare, so the first attempt assumes there is
 * none; a page that has one is written again (the first buffer dropped) with those cells
 * through JSON.stringify.
 */
export function userListJson (rows: readonly UserRow[]): Buffer {
  const size = pageSize(rows)
  if (size >= 0) {
    const out = Buffer.allocUnsafeSlow(size)
    if (writeRows(rows, out)) return out
  }
  const escaped = escapedCells(rows)
  const out = Buffer.allocUnsafeSlow(pageSize(rows, escaped))
  writeRows(rows, out, escaped)
  return out
}

/** The id as JSON writes a number: the digits as PostgreSQL sent them, or formatted. */
function idText (cell: UserRow[0]): Buffer | string {
  return typeof cell === 'number' ? JSON.stringify(cell) : cell
}

/** Bytes of the page's JSON; -1 when a string cell needs escaping and `escaped` is not known yet. */
function pageSize (rows: readonly UserRow[], escaped?: EscapedCells): number {
  let size = rows.length === 0 ? 0 : rows.length * (ROW_FIXED_BYTES + 1) - 1
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]
    const id = idText(row[0])
    size += id.length
    for (let c = 1; c < 4; c++) {
      const cell = escaped?.get(r * 4 + c) ?? row[c] as Buffer | string
      if (typeof cell !== 'string') size += cell.length
      else if (escaped || !ESCAPED_CHARS.test(cell)) size += Buffer.byteLength(cell, 'utf8')
      else return -1
    }
  }
  return size
}

function escapedCells (rows: readonly UserRow[]): EscapedCells {
  const escaped: EscapedCells = new Map()
  for (let r = 0; r < rows.length; r++) {
    for (let c = 1; c < 4; c++) {
      const cell = rows[r][c] as Buffer | string
      if (typeof cell === 'string' ? ESCAPED_CHARS.test(cell) : !isPlain(cell)) {
        escaped.set(r * 4 + c, JSON.stringify(typeof cell === 'string' ? cell : cell.toString('utf8')).slice(1, -1))
      }
    }
  }
  return escaped
}

/** Writes the page into `out`; false if a cell needs escaping that `escaped` does not hold. */
function writeRows (rows: readonly UserRow[], out: Buffer, escaped?: EscapedCells): boolean {
  let at = 0
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]
    if (r > 0) out[at++] = 0x2c
    at = copyFixed(KEYS[0], out, at)
    const id = idText(row[0])
    at = typeof id === 'string' ? at + out.write(id, at, 'latin1') : copyFixed(id, out, at)
    for (let c = 1; c < 4; c++) {
      at = copyFixed(KEYS[c], out, at)
      const cell = escaped?.get(r * 4 + c) ?? row[c] as Buffer | string
      at = typeof cell === 'string' ? at + out.write(cell, at, 'utf8') : copyPlain(cell, out, at)
      if (at < 0) return false
    }
    at = copyFixed(ROW_END, out, at)
  }
  return true
}

// Cells are tens of bytes: a plain loop beats a native copy call per cell, and can check
// each byte on the way.

/** Copies a cell into `out` at `at` and returns the end, or -1 at a byte JSON escapes. */
function copyPlain (cell: Uint8Array, out: Buffer, at: number): number {
  for (let i = 0; i < cell.length; i++) {
    const byte = cell[i]
    if (ESCAPED[byte] === 1) return -1
    out[at + i] = byte
  }
  return at + cell.length
}

/** Copies bytes known to need no escaping: the keys, the id's digits. */
function copyFixed (bytes: Uint8Array, out: Buffer, at: number): number {
  for (let i = 0; i < bytes.length; i++) out[at + i] = bytes[i]
  return at + bytes.length
}

function isPlain (cell: Uint8Array): boolean {
  for (let i = 0; i < cell.length; i++) if (ESCAPED[cell[i]] === 1) return false
  return true
}
