import t from 'tap'
import { build, login, seedAccounts, testDatabases } from '../helper.js'

const { user } = seedAccounts
const record = { id: user.id, username: user.username, email: user.email, role: user.role }
const forbidden = { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' }
const notObject = { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición debe ser un objeto JSON' }

for (const kind of testDatabases()) {
  t.test(`GET /users/me on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const token = await login(app, user.email, user.password)
    const me = (options: { payload?: string, contentType?: string } = {}) => app.inject({
      method: 'GET',
      url: '/users/me',
      headers: { authorization: `Bearer ${token}`, ...(options.contentType ? { 'content-type': options.contentType } : {}) },
      ...(options.payload !== undefined ? { payload: options.payload } : {})
    })
    const json = (body: unknown) => me({ payload: JSON.stringify(body), contentType: 'application/json' })

    t.test('no body at all → 200 with the record as stored', async (t) => {
      const response = await me()
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), record)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
    })

    t.test('Content-Type: application/json with an empty body is an absent body → 200', async (t) => {
      const response = await me({ payload: '', contentType: 'application/json' })
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), record)
    })

    t.test('an empty object → 200', async (t) => {
      const response = await json({})
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), record)
    })

    t.test('the caller\'s own e-mail, in any case → 200', async (t) => {
      for (const email of [user.email, user.email.toUpperCase(), 'User@Example.COM']) {
        const response = await json({ email, password: 'User12345' })
        t.equal(response.statusCode, 200, email)
        t.strictSame(response.json(), record)
      }
    })

    t.test('the password is never checked: wrong, empty, or not even a string → 200', async (t) => {
      for (const password of ['Wrong!!!', '', 42, null, { a: 1 }]) {
        const response = await json({ email: user.email, password })
        t.equal(response.statusCode, 200, JSON.stringify(password))
        t.strictSame(response.json(), record)
      }
    })

    t.test('another user\'s e-mail, or an unknown one → 403', async (t) => {
      for (const email of [seedAccounts.admin.email, 'nadie@example.com']) {
        const response = await json({ email, password: seedAccounts.admin.password })
        t.equal(response.statusCode, 403, email)
        t.strictSame(response.json(), forbidden)
      }
    })

    t.test('an e-mail that is not valid → 400 with the field message', async (t) => {
      // Blank is not "missing" here: the field is optional, and a blank one is not a valid e-mail.
      for (const email of ['not-an-email', 'a@b', `${'x'.repeat(250)}@example.com`, 42, null, '', '  ']) {
        const response = await json({ email })
        t.equal(response.statusCode, 400, JSON.stringify(email))
        const expected = email === 42 || email === null ? { email: 'El email debe ser un texto' } : { email: 'El email debe ser valido' }
        t.strictSame(response.json(), expected)
      }
    })

    t.test('a JSON body that is not an object → 400', async (t) => {
      for (const payload of ['[]', '"user@example.com"', '42', 'true', 'null', '[{"email":"user@example.com"}]']) {
        const response = await me({ payload, contentType: 'application/json' })
        t.equal(response.statusCode, 400, payload)
        t.strictSame(response.json(), notObject)
      }
    })

    t.test('malformed JSON → 400, other content types → 415', async (t) => {
      const malformed = await me({ payload: '{"email":', contentType: 'application/json' })
      t.equal(malformed.statusCode, 400)
      t.strictSame(malformed.json(), { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición no es un JSON válido' })
      const text = await me({ payload: 'email=user@example.com', contentType: 'text/plain' })
      t.equal(text.statusCode, 415)
      t.strictSame(text.json(), { statusCode: 415, error: 'Unsupported Media Type', message: 'Tipo de contenido no soportado' })
      // Without a body the type describes nothing: an absent body, as with no Content-Type, also
      // one Fastify cannot read (it answered 415 before any parser of ours ran).
      for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'json', 'a, b']) {
        const empty = await me({ payload: '', contentType })
        t.strictSame([empty.statusCode, empty.json()], [200, record], `${contentType} with no body`)
      }
      const unreadable = await me({ payload: '{}', contentType: 'json' })
      t.strictSame([unreadable.statusCode, unreadable.json()], [415, { statusCode: 415, error: 'Unsupported Media Type', message: 'Tipo de contenido no soportado' }], 'with a body, an unreadable type is 415')
    })

    t.test('a path no route serves is 404 whatever Content-Type came, body or not', async (t) => {
      const notFound = { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }
      for (const url of ['/nope', '/auth/x', '/users/me/x']) {
        for (const payload of [undefined, '{}']) {
          const response = await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${token}`, 'content-type': 'json' }, ...(payload ? { payload } : {}) })
          t.strictSame([response.statusCode, response.json()], [404, notFound], `${url}, ${payload ?? 'no body'}`)
        }
      }
    })

    t.test('__proto__ in the body reaches nothing', async (t) => {
      const response = await me({ payload: '{"__proto__":{"email":"admin@example.com"},"email":"user@example.com"}', contentType: 'application/json' })
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), record)
    })

    t.test('HEAD answers as GET would, headers only (RFC 9110 §9.3.2)', async (t) => {
      const headers = (response: { headers: Record<string, unknown> }, names: string[]) => Object.fromEntries(names.map((name) => [name, response.headers[name]]))
      const shown = ['content-type', 'content-length', 'cache-control', 'x-content-type-options']
      const get = await me()
      const head = await app.inject({ method: 'HEAD', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
      t.equal(head.statusCode, 200)
      t.strictSame(head.body, '')
      t.strictSame(headers(head, shown), headers(get, shown), 'the GET answer\'s headers, its length included')
      const admin = await app.inject({ method: 'HEAD', url: '/users/me', headers: { authorization: `Bearer ${await login(app, seedAccounts.admin.email, seedAccounts.admin.password)}` } })
      t.equal(admin.statusCode, 403, 'the role rule is GET\'s')
      t.strictSame(admin.body, '')
      const anonymous = await app.inject({ method: 'HEAD', url: '/users/me' })
      t.equal(anonymous.statusCode, 401)
      t.equal(anonymous.headers['www-authenticate'], 'Bearer')
      t.strictSame(anonymous.body, '')
      // Over a real socket: Node, not light-my-request, keeps the body off the wire, so a GET
      // that follows on the same kept-alive connection reads its own answer.
      await app.listen({ port: 0, host: '127.0.0.1' })
      const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
      const authorization = `Bearer ${token}`
      const onWire = await fetch(`${base}/users/me`, { method: 'HEAD', headers: { authorization } })
      t.strictSame([onWire.status, onWire.headers.get('content-length'), await onWire.text()], [200, get.headers['content-length'], ''])
      const next = await fetch(`${base}/users/me`, { headers: { authorization } })
      t.strictSame([next.status, await next.json()], [200, record])
    })

    t.test('the response is the stored record, never the body\'s fields or a hash', async (t) => {
      const response = await json({ email: user.email, username: 'someone', role: 'ROLE_ADMIN', id: 1 })
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), record)
      t.notMatch(response.body, /argon2|password/)
    })
  })
}
