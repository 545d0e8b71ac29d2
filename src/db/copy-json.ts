/**
 * Rows as PostgreSQL's COPY text format gives them (the fields tab-separated, one row a line,
 * an integer id first), turned into the JSON text of their objects, comma-separated: byte for
 * byte what JSON.stringify writes for those objects, without a string, an object or a Buffer
 * per row. The fields, their order and kinds, are the caller's (the listing takes them from
 * its response schema).
 *
 * COPY TO writes a backslash as `\\`, the control characters \b \f \n \r \t \v as those letters
 * after a backslash, and every other byte as it is (it never writes octal or hex escapes; NULL,
 * `\N`, cannot occur: the columns are NOT NULL). JSON spells all of those the same way but
 * \v (`\u000b`), and it escapes `"` and the other control characters, which COPY leaves bare.
 * So most bytes are copied as they are, and the few that differ are rewritten on the way.
 */

/** Output is written into chunks of this size, each sent as it is: nothing is copied twice. */
const CHUNK_BYTES = 64 * 1024

const TAB = 0x09
const NEWLINE = 0x0a
const BACKSLASH = 0x5c
const QUOTE = 0x22

// Bytes that are not copied as they are: control characters (the tab and newline among them), `"` and `\`.
const SPECIAL = new Uint8Array(256)
for (let byte = 0; byte < 0x20; byte++) SPECIAL[byte] = 1
SPECIAL[QUOTE] = 1
SPECIAL[BACKSLASH] = 1
// What may follow a backslash unchanged: the letters both formats share, and the backslash itself.
const SHARED_ESCAPES = new Uint8Array(256)
for (const letter of 'bfnrt\\') SHARED_ESCAPES[letter.charCodeAt(0)] = 1

const HEX = Buffer.from('0123456789abcdef', 'latin1')
/** The most a byte of COPY text can become: a bare control character as `\u00XX`. */
const MOST_PER_BYTE = 6

/** A field of the rows: an integer is written bare, a string quoted. Names are plain ASCII keys. */
export interface CopyField { readonly name: string, readonly kind: 'integer' | 'string' }

/** What starts each field (its key, and the quote that closes the string before it), and what ends a row. */
function framing (fields: readonly CopyField[]) {
  if (fields[0]?.kind !== 'integer') throw new TypeError('the first field must be the integer id the pages are keyed by')
  const quote = (field: CopyField | undefined) => field?.kind === 'string' ? '"' : ''
  const starts = fields.map((field, i) => Buffer.from(`${i === 0 ? '{' : `${quote(fields[i - 1])},`}${JSON.stringify(field.name)}:${quote(field)}`, 'latin1'))
  const end = Buffer.from(`${quote(fields.at(-1))}}`, 'latin1')
  return { starts, end, fixedBytes: starts.reduce((total, start) => total + start.length, 0) + end.length + 1 }
}

/** What a page of the listing held: how many rows, and the last id. */
export interface CopyJsonPage {
  readonly rows: number
  readonly lastId: number
}

/**
 * Turns COPY text (whole lines, in as many pieces as the driver hands over) into JSON, handed
 * to `onChunk` a chunk at a time as each fills: a chunk goes to the socket while the page is
 * still arriving, and dies young, before V8 would move it to the old generation, where its
 * memory would wait for a full collection. One writer a page; `continues` when rows came before
 * it, so that its first row is preceded by a comma.
 */
export function createCopyJsonWriter (fields: readonly CopyField[], onChunk: (chunk: Buffer) => void, { continues = false } = {}) {
  const { starts: FIELD_STARTS, end: ROW_END, fixedBytes: FIXED_BYTES } = framing(fields)
  let out = Buffer.alloc(0)
  let at = 0
  let rows = 0
  let lastId = 0

  /** Makes room for a line of `length` bytes, starting a new chunk when this one is too full. */
  function reserve (length: number): void {
    const need = length * MOST_PER_BYTE + FIXED_BYTES
    if (out.length - at >= need) return
    if (at > 0) onChunk(out.subarray(0, at))
    out = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, need))
    at = 0
  }

  function put (start: Uint8Array): void {
    for (let i = 0; i < start.length; i++) out[at++] = start[i]
  }

  /** Writes a byte JSON escapes: `"`, `\\` or a control character. */
  function escapeBare (byte: number): void {
    out[at++] = BACKSLASH
    if (byte === QUOTE || byte === BACKSLASH) {
      out[at++] = byte
      return
    }
    out[at++] = 0x75 // u
    out[at++] = 0x30
    out[at++] = 0x30
    out[at++] = HEX[byte >> 4]
    out[at++] = HEX[byte & 15]
  }

  /** Converts one line, `text[from..end)` without its newline; returns its id. */
  function line (text: Uint8Array, from: number, end: number): number {
    if (rows > 0 || continues) out[at++] = 0x2c
    put(FIELD_STARTS[0])
    let field = 0
    let id = 0
    for (let i = from; i < end; i++) {
      const byte = text[i]
      if (SPECIAL[byte] === 0) {
        out[at++] = byte
        if (field === 0) id = id * 10 + byte - 0x30
      } else if (byte === TAB) {
        put(FIELD_STARTS[++field])
      } else if (byte === BACKSLASH && i + 1 < end) {
        const escaped = text[++i]
        if (SHARED_ESCAPES[escaped] === 1) {
          out[at++] = BACKSLASH
          out[at++] = escaped
        } else if (escaped === 0x76) { // \v, which JSON has no letter for
          escapeBare(0x0b)
        } else if (SPECIAL[escaped] === 0) { // any other escaped byte stands for itself
          out[at++] = escaped
        } else {
          escapeBare(escaped)
        }
      } else {
        escapeBare(byte)
      }
    }
    put(ROW_END)
    rows++
    return id
  }

  return {
    /** Adds COPY text made of whole lines. */
    write (text: Uint8Array): void {
      let from = 0
      while (from < text.length) {
        let end = text.indexOf(NEWLINE, from)
        if (end < 0) end = text.length
        reserve(end - from)
        lastId = line(text, from, end)
        from = end + 1
      }
    },
    /** Hands over the last chunk; the writer is done with. */
    end (): CopyJsonPage {
      if (at > 0) onChunk(out.subarray(0, at))
      at = 0
      return { rows, lastId }
    }
  }
}
