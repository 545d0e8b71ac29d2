import t from 'tap'
import fc from 'fast-check'
import { eq } from 'drizzle-orm'
import { users } from '../../src/db/schema.js'
import { build, testDatabases } from '../helper.js'

const usernameMessages = [
  'El username es obligatorio',
  'El username debe tener entre 3 y 20 caracteres',
  'El username no puede contener caracteres de control',
  'El username no puede empezar ni terminar con espacios'
]
const taken = { username: 'El username ya está en uso' }

// The contract's key, written out here rather than imported, so the test checks src/users/user.ts.
const key = (name: string) => name.normalize('NFKC').toLowerCase()

// Spellings that NFC, NFKC or lower-casing bring together (or, for σ/ς, keep apart).
const spellings = [
  ['a', 'A', '\uff41', '\uff21'],
  ['\u00e1', 'a\u0301', '\u00c1', 'A\u0301'],
  ['k', 'K', '\u212a', '\uff4b'],
  ['1', '\uff11', '\u00b9', '\u2460'],
  ['ff', 'FF', 'Ff', '\ufb00'],
  ['\u00e5', 'a\u030a', '\u00c5', '\u212b'],
  ['\u00df', '\u1e9e', 'ss'],
  ['\u03c3', '\u03a3', '\u03c2'],
  ['\u0130', 'i\u0307', 'I', '\u0131']
]
const spell = (groups: string[][]) => fc.tuple(...groups.map((group) => fc.constantFrom(...group))).map((parts) => parts.join(''))
// Three letters of five: 125 keys, so names collide often.
const twins = fc.array(fc.constantFrom(...spellings.slice(0, 5)), { minLength: 3, maxLength: 3 }).chain(spell)
const longer = fc.array(fc.constantFrom(...spellings), { minLength: 2, maxLength: 8 }).chain(spell)
// Letters and digits only, which the validator must accept when 3-20 long after NFC.
const plausible = fc.oneof(twins, longer)
// And anything else: spaces, invisible and control characters, surrogates, emoji, random text.
const odd = fc.oneof(
  fc.tuple(plausible, fc.constantFrom(' ', '\u200b', '\u00a0', '\u2800', '\u3164', '\ufe0f', '\ud800', '\ue000', '\u0378', '\ufffd', '😀', '\u0301'), fc.nat(3))
    .map(([name, extra, at]) => { const chars = [...name]; chars.splice(at, 0, extra); return chars.join('') }),
  fc.string({ unit: 'grapheme', minLength: 2, maxLength: 12 }),
  fc.string({ unit: 'binary', minLength: 2, maxLength: 12 })
)
const codePoints = (text: string) => [...text].length

for (const kind of testDatabases()) {
  t.test(`usernames on ${kind}: accepted names round-trip NFC, and collisions follow the key`, async (t) => {
    const app = await build(t, kind)
    // Every key held in the database, with the stored names that hold it (the seed's too).
    const holders = new Map<string, string>([['admin', 'admin'], ['user', 'user']])
    let n = 0
    const answers = { accepted: 0, taken: 0, refused: 0 }
    const names = fc.oneof(
      { weight: 3, arbitrary: twins.map((name) => ({ name, plausible: true })) },
      { weight: 1, arbitrary: longer.map((name) => ({ name, plausible: true })) },
      { weight: 2, arbitrary: odd.map((name) => ({ name, plausible: false })) }
    )
    await fc.assert(fc.asyncProperty(names, async ({ name: username, plausible: lettersOnly }) => {
      const email = `prop${process.pid}.${n++}@example.com`
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email, password: 'Secreto123' } })
      const body = response.json()
      const nfc = username.normalize('NFC')
      if (response.statusCode === 201) {
        if (body.username !== nfc) throw new Error(`${JSON.stringify(username)} answered as ${JSON.stringify(body.username)}, not its NFC form`)
        const [row] = await app.database.db.select({ username: users.username, usernameKey: users.usernameKey }).from(users).where(eq(users.id, body.id))
        if (row.username !== nfc || row.usernameKey !== key(username)) throw new Error(`stored as ${JSON.stringify(row)}`)
        if (holders.has(key(username))) throw new Error(`${JSON.stringify(username)} accepted though ${JSON.stringify(holders.get(key(username)))} holds its key`)
        holders.set(key(username), nfc)
        answers.accepted++
        return
      }
      if (response.statusCode === 409) {
        if (JSON.stringify(body) !== JSON.stringify(taken)) throw new Error(`409 body ${response.body}`)
        if (!holders.has(key(username))) throw new Error(`${JSON.stringify(username)} refused as taken, but no stored name has its key`)
        answers.taken++
        return
      }
      if (response.statusCode !== 400) throw new Error(`${response.statusCode} for ${JSON.stringify(username)}`)
      if (Object.keys(body).join() !== 'username' || !usernameMessages.includes(body.username)) throw new Error(`400 body ${response.body}`)
      answers.refused++
      const length = codePoints(nfc)
      if (lettersOnly && length >= 3 && length <= 20) {
        throw new Error(`${JSON.stringify(username)} (letters and digits, ${length} after NFC) refused: ${body.username}`)
      }
    }), { numRuns: 250 })
    // fast-check's shrinking runs count too; what matters is that each kind of answer was seen.
    t.ok(answers.accepted > 0 && answers.taken > 0 && answers.refused > 0, `answers agreed with the key: ${JSON.stringify(answers)}`)
  })
}
