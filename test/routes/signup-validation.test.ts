import { eq } from 'drizzle-orm'
import t from 'tap'
import type { App } from '../../src/app.js'
import { users } from '../../src/db/schema.js'
import { assertLoggedIn, build, errorBodies, errorBody, testDatabases } from '../helper.js'

const M = {
  usernameMissing: 'El username es obligatorio',
  usernameType: 'El username debe ser un texto',
  usernameLength: 'El username debe tener entre 3 y 20 caracteres',
  usernameControl: 'El username no puede contener caracteres de control',
  emailMissing: 'El email es obligatorio',
  emailType: 'El email debe ser un texto',
  emailInvalid: 'El email debe ser valido',
  passwordMissing: 'La password es obligatoria',
  passwordType: 'La password debe ser un texto',
  passwordLength: 'La password debe tener entre 8 y 16 caracteres',
  passwordComposition: 'La password debe tener al menos una numero, una letra minuscula y una letra mayuscula'
}
const invalidCredentials = errorBodies.badCredentials
/** The id the database gave the account: what the 201 must carry, as a number. */
const storedId = async (app: App, email: string) => (await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, email)))[0]?.id

let n = 0
const valid = () => {
  n++
  return { username: `val${process.pid % 1000}x${n}`, email: `val${process.pid}.${n}@example.com`, password: 'Secreto123' }
}

// [what, overrides of a valid body, expected 400 body]
const fieldCases: Array<[string, Record<string, unknown>, Record<string, string>]> = [
  ['username missing', { username: undefined }, { username: M.usernameMissing }],
  ['username empty', { username: '' }, { username: M.usernameMissing }],
  ['username blank', { username: '    ' }, { username: M.usernameMissing }],
  ['username of 2 code points', { username: 'ab' }, { username: M.usernameLength }],
  ['username of 2 code points with an accent', { username: 'jé' }, { username: M.usernameLength }],
  ['username of 21 code points', { username: 'a'.repeat(21) }, { username: M.usernameLength }],
  ['username of 21 code points with emoji', { username: '😀'.repeat(21) }, { username: M.usernameLength }],
  ['username with a control character', { username: 'ana\u0007x' }, { username: M.usernameControl }],
  ['username with a newline', { username: 'ana\nlopez' }, { username: M.usernameControl }],
  ['email missing', { email: undefined }, { email: M.emailMissing }],
  ['email empty', { email: '' }, { email: M.emailMissing }],
  ['email blank', { email: '  ' }, { email: M.emailMissing }],
  ['email without @', { email: 'ana.example.com' }, { email: M.emailInvalid }],
  ['email without a dot in the domain', { email: 'ana@localhost' }, { email: M.emailInvalid }],
  ['email with spaces', { email: 'ana lopez@example.com' }, { email: M.emailInvalid }],
  ['email of 255 characters', { email: 'a'.repeat(243) + '@example.com' }, { email: M.emailInvalid }],
  ['password missing', { password: undefined }, { password: M.passwordMissing }],
  ['password empty', { password: '' }, { password: M.passwordMissing }],
  ['password of 7', { password: 'Secre12' }, { password: M.passwordLength }],
  ['password of 17', { password: 'Secreto123456789A' }, { password: M.passwordLength }],
  ['password of 17 failing composition too: length wins', { password: 'a'.repeat(17) }, { password: M.passwordLength }],
  ['password without a digit', { password: 'SecretoSecreto' }, { password: M.passwordComposition }],
  ['password without a lowercase letter', { password: 'SECRETO123' }, { password: M.passwordComposition }],
  ['password without an uppercase letter', { password: 'secreto123' }, { password: M.passwordComposition }],
  ['every field failing at once', { username: 'x', email: 'no', password: 'short' }, { username: M.usernameLength, email: M.emailInvalid, password: M.passwordLength }],
  ['every field missing', { username: undefined, email: undefined, password: undefined }, { username: M.usernameMissing, email: M.emailMissing, password: M.passwordMissing }]
]
const wrongTypes: Array<[string, unknown]> = [['a number', 12345678], ['null', null], ['an array', ['Secreto123']], ['an object', { value: 'Secreto123' }], ['a boolean', true]]
const typeMessages = { username: M.usernameType, email: M.emailType, password: M.passwordType }

// Bodies that are accepted at the boundaries (201).
const accepted: Array<[string, Record<string, unknown>]> = [
  ['username of 3 code points with an accent', { username: 'Jé1' }],
  ['username of 20 code points with emoji', { username: '😀'.repeat(19) + 'z' }],
  ['password of exactly 8', { password: 'Secret12' }],
  ['password of exactly 16', { password: 'Secreto123456789' }],
  ['password with accented letters and spaces kept as is', { password: ' Ñandú 12 ' }],
  ['email of exactly 254 characters', { email: 'b'.repeat(242) + '@example.com' }]
]

for (const kind of testDatabases()) {
  t.test(`sign-up validation on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const signup = (payload: unknown, headers: Record<string, string> = {}) =>
      app.inject({ method: 'POST', url: '/auth/signup', payload: payload as object, headers })

    for (const [what, overrides, expected] of fieldCases) {
      t.test(what, async (t) => {
        const response = await signup({ ...valid(), ...overrides })
        t.equal(response.statusCode, 400)
        t.strictSame(response.json(), expected)
      })
    }

    for (const field of ['username', 'email', 'password'] as const) {
      for (const [what, value] of wrongTypes) {
        t.test(`${field} as ${what}`, async (t) => {
          const response = await signup({ ...valid(), [field]: value })
          t.equal(response.statusCode, 400)
          t.strictSame(response.json(), { [field]: typeMessages[field] })
        })
      }
    }

    for (const [what, overrides] of accepted) {
      t.test(`accepted: ${what}`, async (t) => {
        const body = { ...valid(), ...overrides }
        const response = await signup(body)
        t.equal(response.statusCode, 201)
        const email = String(body.email).toLowerCase()
        const id = await storedId(app, email)
        t.ok(Number.isInteger(id), 'stored')
        t.strictSame(response.json(), { id, username: body.username, email })
        const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password } })
        assertLoggedIn(t, login, { id: id!, username: String(body.username), email }, 'the password is compared exactly as received')
        const trimmed = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: String(body.password).trim() + (String(body.password).trim() === body.password ? 'x' : '') } })
        t.equal(trimmed.statusCode, 401, 'a changed password is refused')
        t.strictSame(trimmed.json(), invalidCredentials)
      })
    }

    t.test('unknown fields are ignored and a role never applies', async (t) => {
      const body = { ...valid(), role: 'ROLE_ADMIN', id: 999, extra: { a: 1 } }
      const response = await signup(body)
      t.equal(response.statusCode, 201)
      const id = await storedId(app, body.email)
      t.ok(Number.isInteger(id), 'stored')
      t.strictSame(response.json(), { id, username: body.username, email: body.email })
      t.not(id, 999)
      const token = (await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password } })).json().token
      const me = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
      t.equal(me.statusCode, 200)
      t.strictSame(me.json(), { id, username: body.username, email: body.email, role: 'ROLE_USER' }, 'stored as ROLE_USER')
    })

    t.test('bodies that are not a JSON object', async (t) => {
      const cases: Array<[string, () => ReturnType<typeof signup>, number, object]> = [
        ['no body', () => signup(undefined), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición es obligatorio')],
        ['an empty JSON body', () => signup('', { 'content-type': 'application/json' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición es obligatorio')],
        ['malformed JSON', () => signup('{"username": ', { 'content-type': 'application/json' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición no es un JSON válido')],
        ['a JSON array', () => signup('[1,2]', { 'content-type': 'application/json' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición debe ser un objeto JSON')],
        ['a JSON string', () => signup('"hola"', { 'content-type': 'application/json' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición debe ser un objeto JSON')],
        ['JSON null', () => signup('null', { 'content-type': 'application/json' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición debe ser un objeto JSON')],
        ['text/plain', () => signup('username=ana', { 'content-type': 'text/plain' }), 415, errorBody(415, 'Unsupported Media Type', 'Tipo de contenido no soportado')],
        ['a form', () => signup('username=ana', { 'content-type': 'application/x-www-form-urlencoded' }), 415, errorBody(415, 'Unsupported Media Type', 'Tipo de contenido no soportado')],
        // No body: the type describes nothing, and the body is absent whatever it says.
        ['text/plain with no body', () => signup('', { 'content-type': 'text/plain' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición es obligatorio')],
        ['a form with no body', () => signup(undefined, { 'content-type': 'application/x-www-form-urlencoded' }), 400, errorBody(400, 'Bad Request', 'El cuerpo de la petición es obligatorio')],
        ['over 16 KiB', () => signup(JSON.stringify({ ...valid(), pad: 'x'.repeat(16 * 1024) }), { 'content-type': 'application/json' }), 413, errorBody(413, 'Payload Too Large', 'El cuerpo de la petición es demasiado grande')]
      ]
      for (const [what, send, status, body] of cases) {
        const response = await send()
        t.equal(response.statusCode, status, what)
        t.strictSame(response.json(), body, what)
      }
    })

    t.test('login bodies get the same treatment', async (t) => {
      const absent = await app.inject({ method: 'POST', url: '/auth/login' })
      t.equal(absent.statusCode, 400)
      t.strictSame(absent.json(), errorBody(400, 'Bad Request', 'El cuerpo de la petición es obligatorio'))
      const missing = await app.inject({ method: 'POST', url: '/auth/login', payload: {} })
      t.equal(missing.statusCode, 400)
      t.strictSame(missing.json(), { email: M.emailMissing, password: M.passwordMissing })
      const types = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: ['a@b.co'], password: null } })
      t.equal(types.statusCode, 400)
      t.strictSame(types.json(), { email: M.emailType, password: M.passwordType })
    })

    t.test('__proto__ and constructor keys never reach an object', async (t) => {
      const body = valid()
      const raw = `{"__proto__": {"role": "ROLE_ADMIN", "polluted": true}, "constructor": {"prototype": {"polluted": true}}, "username": "${body.username}", "email": "${body.email}", "password": "${body.password}"}`
      const response = await signup(raw, { 'content-type': 'application/json' })
      t.equal(response.statusCode, 201)
      const id = await storedId(app, body.email)
      t.ok(Number.isInteger(id), 'stored')
      t.strictSame(response.json(), { id, username: body.username, email: body.email })
      t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched')
      const token = (await app.inject({ method: 'POST', url: '/auth/login', payload: { email: body.email, password: body.password } })).json().token
      const listing = await app.inject({ method: 'GET', url: '/admin/users', headers: { authorization: `Bearer ${token}` } })
      t.equal(listing.statusCode, 403, 'the account is not an admin')
      t.strictSame(listing.json(), errorBody(403, 'Forbidden', 'Acceso denegado'))
    })
  })
}
