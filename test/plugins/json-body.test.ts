import t from 'tap'
import { assertSignedUp, build, login, seedAccounts, testDatabases } from '../helper.js'

const malformed = { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición no es un JSON válido' }
const control = { username: 'El username no puede contener caracteres de control' }

// Byte sequences that are not UTF-8; a lossy decoder turns each into U+FFFD.
const invalid: Array<[string, number[]]> = [
  ['a lone continuation byte', [0x80]],
  ['0xFF', [0xff]],
  ['an overlong slash', [0xc0, 0xaf]],
  ['a surrogate encoded as UTF-8 (CESU-8)', [0xed, 0xa0, 0x80]],
  ['a code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ['a sequence cut short', [0xe2, 0x82]]
]

/** A sign-up body whose username holds `bytes` raw, between two ASCII letters. */
const bodyWith = (bytes: number[], n: number) => Buffer.concat([
  Buffer.from('{"username":"ab'),
  Buffer.from(bytes),
  Buffer.from(`c","email":"utf${process.pid}.${n}@example.com","password":"Secreto123"}`)
])

for (const kind of testDatabases()) {
  t.test(`JSON bodies on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const post = (url: string, payload: Buffer | string) => app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })

    for (const [i, [what, bytes]] of invalid.entries()) {
      t.test(`not UTF-8 (${what}) → 400 malformed JSON, never a U+FFFD username`, async (t) => {
        const response = await post('/auth/signup', bodyWith(bytes, i))
        t.equal(response.statusCode, 400)
        t.strictSame(response.json(), malformed)
      })
    }

    t.test('two different invalid sequences are both refused, not stored as one name', async (t) => {
      const first = await post('/auth/signup', bodyWith([0xff], 100))
      const second = await post('/auth/signup', bodyWith([0xfe], 101))
      t.strictSame([first.statusCode, second.statusCode], [400, 400])
      t.strictSame([first.json(), second.json()], [malformed, malformed])
    })

    t.test('login and the own-info body go through the same parser', async (t) => {
      const loginBody = Buffer.concat([Buffer.from(`{"email":"${seedAccounts.user.email}","password":"User1234`), Buffer.from([0xff]), Buffer.from('"}')])
      const refused = await post('/auth/login', loginBody)
      t.equal(refused.statusCode, 400)
      t.strictSame(refused.json(), malformed)
      const token = await login(app, seedAccounts.user.email, seedAccounts.user.password)
      const me = await app.inject({
        method: 'GET',
        url: '/users/me',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: Buffer.concat([Buffer.from('{"email":"user'), Buffer.from([0xc3]), Buffer.from('@example.com"}')])
      })
      t.equal(me.statusCode, 400)
      t.strictSame(me.json(), malformed)
    })

    t.test('lone surrogates written as JSON escapes are valid JSON, and refused as a username', async (t) => {
      for (const [n, escape] of ['\\ud800', '\\udfff', '\\udc00\\ud800'].entries()) {
        const response = await post('/auth/signup', `{"username":"abc${escape}","email":"sur${process.pid}.${n}@example.com","password":"Secreto123"}`)
        t.equal(response.statusCode, 400, escape)
        t.strictSame(response.json(), control, escape)
      }
    })

    t.test('valid multi-byte UTF-8 and escaped pairs still parse', async (t) => {
      const response = await post('/auth/signup', Buffer.from(`{"username":"ñu\\ud83d\\ude00","email":"mb${process.pid}@example.com","password":"Secreto123"}`))
      await assertSignedUp(t, app, response, { username: 'ñu😀', email: `mb${process.pid}@example.com` })
    })
  })
}

t.test('on a bare instance: strict UTF-8 JSON, an empty body absent, prototype keys as the instance says', async (t) => {
  const { default: Fastify } = await import('fastify')
  const { default: jsonBody } = await import('../../src/plugins/json-body.js')
  const app = Fastify({ onProtoPoisoning: 'remove' })
  await app.register(jsonBody)
  app.post('/echo', async (request) => ({ body: request.body ?? 'absent' }))
  t.teardown(() => app.close())
  const send = (payload: Buffer | string) => app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload })
  const ok = await send('{"name":"ñandú"}')
  t.strictSame([ok.statusCode, ok.json()], [200, { body: { name: 'ñandú' } }])
  const broken = await send(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]))
  t.strictSame([broken.statusCode, broken.json().code], [400, 'FST_ERR_CTP_INVALID_JSON_BODY'], 'invalid UTF-8 is malformed JSON, not U+FFFD')
  const empty = await send('')
  t.strictSame([empty.statusCode, empty.json()], [200, { body: 'absent' }])
  const poisoned = await send('{"a":1,"__proto__":{"admin":true}}')
  t.strictSame([poisoned.statusCode, poisoned.json()], [200, { body: { a: 1 } }], '__proto__ removed')
})
