import t from 'tap'
import { assertSignedUp, build, login, seedAccounts, testDatabases } from '../helper.js'

// CONTRACT §4's username rules, the NFC storage and the NFKC + toLowerCase key.
const M = {
  missing: { username: 'El username es obligatorio' },
  length: { username: 'El username debe tener entre 3 y 20 caracteres' },
  control: { username: 'El username no puede contener caracteres de control' },
  spaces: { username: 'El username no puede empezar ni terminar con espacios' },
  taken: { username: 'El username ya está en uso' }
}

let n = 0
const account = (username: unknown) => {
  n++
  return { username, email: `names${process.pid}.${n}@example.com`, password: 'Secreto123' }
}

// Issue 10's spoofing list: each is refused, or collides with `alice`.
const spoofs: Array<[string, string, number, object]> = [
  ['a zero-width space after alice', 'alice\u200b', 400, M.control],
  ['a trailing space', 'alice ', 400, M.spaces],
  ['a leading space', ' alice', 400, M.spaces],
  ['a fullwidth ａ', '\uff41lice', 409, M.taken],
  ['ALICE', 'ALICE', 409, M.taken],
  ['fullwidth ａｌｉｃｅ', '\uff41\uff4c\uff49\uff43\uff45', 409, M.taken],
  ['a right-to-left override', 'root\u202egnp.', 400, M.control],
  ['three Hangul fillers (look blank)', '\u3164\u3164\u3164', 400, M.missing],
  ['three braille blanks (look blank)', '\u2800\u2800\u2800', 400, M.missing]
]

// [what, username, expected 400 body]: the other rules, and which one wins.
const refused: Array<[string, string, object]> = [
  ['three zero-width spaces are blank', '\u200b\u200b\u200b', M.missing],
  ['NEL and tabs are blank', '\u0085\t\t', M.missing],
  ['a byte-order mark', '\ufeffalice', M.control],
  ['a soft hyphen', 'ali\u00adce', M.control],
  ['a variation selector', 'alice\ufe0f', M.control],
  ['a Hangul filler inside', 'ali\u3164ce', M.control],
  ['a lone high surrogate', 'abc\ud800', M.control],
  ['a lone low surrogate', '\udc00abc', M.control],
  ['a private-use character', 'abc\ue000', M.control],
  ['an unassigned code point', 'abc\u0378', M.control],
  ['a noncharacter', 'abc\uffff', M.control],
  ['the replacement character (a decoder lost something)', 'abc\ufffd', M.control],
  ['a no-break space at the end', 'alice\u00a0', M.spaces],
  ['an ideographic space at the start', '\u3000alice', M.spaces],
  ['a braille blank at the end', 'alice\u2800', M.spaces],
  ['control before spaces', ' ali\u200bce', M.control],
  ['length before control', 'a\u200b', M.length],
  ['length counts the NFC form: e + combining acute + x is 2', 'e\u0301x', M.length],
  ['21 code points after NFC', 'é'.repeat(21), M.length]
]

// Accepted; the answer shows the NFC form.
const accepted: Array<[string, string]> = [
  ['an inner space', 'ana lopez'],
  ['an inner braille blank', 'ana\u2800lopez'],
  ['a decomposed é, stored composed', 'Jose\u0301'],
  ['20 decomposed letters are 20 after NFC (40 code points raw)', 'e\u0301'.repeat(20)],
  ['an emoji', 'ana😀'],
  ['Hangul syllables', '한국어']
]

for (const kind of testDatabases()) {
  t.test(`usernames on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const signup = (payload: object) => app.inject({ method: 'POST', url: '/auth/signup', payload })
    const alice = account('alice')
    await assertSignedUp(t, app, await signup(alice), alice as { username: string, email: string }, 'alice')

    for (const [what, username, status, body] of spoofs) {
      t.test(`spoof: ${what} → ${status}`, async (t) => {
        const response = await signup(account(username))
        t.equal(response.statusCode, status)
        t.strictSame(response.json(), body)
      })
    }

    for (const [what, username, body] of refused) {
      t.test(`refused: ${what}`, async (t) => {
        const response = await signup(account(username))
        t.equal(response.statusCode, 400)
        t.strictSame(response.json(), body)
      })
    }

    for (const [what, username] of accepted) {
      t.test(`accepted: ${what}`, async (t) => {
        const body = account(username)
        const response = await signup(body)
        const stored = username.normalize('NFC')
        await assertSignedUp(t, app, response, { username, email: body.email })
        const token = await login(app, body.email, body.password)
        const me = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
        t.equal(me.statusCode, 200)
        t.strictSame(me.json(), { id: response.json().id, username: stored, email: body.email, role: 'ROLE_USER' })
      })
    }

    t.test('a decomposed é is stored composed: the admin listing shows it, and the composed form collides', async (t) => {
      const body = account('Rene\u0301')
      const response = await signup(body)
      await assertSignedUp(t, app, response, { username: 'Ren\u00e9', email: body.email })
      const admin = await login(app, seedAccounts.admin.email, seedAccounts.admin.password)
      const listing = await app.inject({ method: 'GET', url: '/admin/users', headers: { authorization: `Bearer ${admin}` } })
      t.equal(listing.statusCode, 200)
      const row = listing.json().find((user: { id: number }) => user.id === response.json().id)
      t.strictSame(row, { id: response.json().id, username: 'Ren\u00e9', email: body.email, role: 'ROLE_USER' })
      for (const twin of ['Ren\u00e9', 'REN\u00c9', 'RENE\u0301']) {
        const again = await signup(account(twin))
        t.equal(again.statusCode, 409, twin)
        t.strictSame(again.json(), M.taken, twin)
      }
    })

    t.test('the key is NFKC then toLowerCase: ligatures, Kelvin and final sigma', async (t) => {
      const pairs: Array<[string, string, number]> = [
        ['\ufb01rewall', 'FIREWALL', 409], // ﬁ is f + i under NFKC
        ['\u212aelvin', 'kelvin', 409], // KELVIN SIGN → K → k
        ['\u039f\u0394\u039f\u03a3', '\u03bf\u03b4\u03bf\u03c2', 409], // ΟΔΟΣ lower-cases to οδος (final sigma)
        ['\u03bf\u03b4\u03bf\u03c3x', '\u03bf\u03b4\u03bf\u03c2x', 201] // σ and ς are different letters to toLowerCase
      ]
      for (const [first, second, status] of pairs) {
        const original = account(first)
        await assertSignedUp(t, app, await signup(original), original as { username: string, email: string }, first)
        const twin = account(second)
        const response = await signup(twin)
        if (status === 201) await assertSignedUp(t, app, response, twin as { username: string, email: string }, `${first} then ${second}`)
        else t.strictSame([response.statusCode, response.json()], [status, M.taken], `${first} then ${second}`)
      }
    })

    t.test('e-mail and username both taken: both entries', async (t) => {
      const response = await signup({ ...alice, username: 'ＡＬＩＣＥ' })
      t.equal(response.statusCode, 409)
      t.strictSame(response.json(), { email: 'El email ya está registrado', username: 'El username ya está en uso' })
    })

    t.test('racing sign-ups of a name and its fullwidth capitals: one 201 and one 409, every round', async (t) => {
      for (let round = 0; round < 25; round++) {
        const name = `race${round}x${kind[0]}`
        const fullwidth = [...name.toUpperCase()].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join('')
        const answers = await Promise.all([signup(account(name)), signup(account(fullwidth))])
        t.strictSame(answers.map((a) => a.statusCode).sort(), [201, 409], `round ${round}`)
        t.strictSame(answers.find((a) => a.statusCode === 409)?.json(), M.taken)
      }
    })
  })
}
