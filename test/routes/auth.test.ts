import { eq } from 'drizzle-orm'
import t from 'tap'
import type { App } from '../../src/app.js'
import { users } from '../../src/db/schema.js'
import { assertBadCredentials, assertLoggedIn, build, seedAccounts, testDatabases, uniqueUser } from '../helper.js'

const decodeClaims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString())
const decodeHeader = (token: string) => JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString())
/** The id the database gave the account: what every answer about it must carry, as a number. */
const storedId = async (app: App, email: string) => (await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, email)))[0]?.id

for (const kind of testDatabases()) {
  t.test(`auth routes on ${kind}`, async (t) => {
    const app = await build(t, kind)

    t.test('sign-up creates a ROLE_USER account and answers 201 with id, username and lower-cased e-mail', async (t) => {
      const user = uniqueUser('su')
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...user, email: user.email.toUpperCase(), role: 'ROLE_ADMIN' } })
      t.equal(response.statusCode, 201)
      const body = response.json()
      const id = await storedId(app, user.email)
      t.ok(Number.isInteger(id) && id! > 2, 'stored after the seed accounts')
      t.strictSame(body, { id, username: user.username, email: user.email })
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')

      const token = assertLoggedIn(t, await app.inject({ method: 'POST', url: '/auth/login', payload: { email: user.email, password: user.password } }), { id: id!, ...user })
      const me = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
      t.equal(me.statusCode, 200, 'the role field was ignored: the account is ROLE_USER')
      t.strictSame(me.json(), { id, username: user.username, email: user.email, role: 'ROLE_USER' })
    })

    t.test('sign-up with invalid fields answers 400 with one message per field', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username: 'ab', email: 'not-an-email', password: 'sinnumeros' } })
      t.equal(response.statusCode, 400)
      t.strictSame(response.json(), {
        username: 'El username debe tener entre 3 y 20 caracteres',
        email: 'El email debe ser valido',
        password: 'La password debe tener al menos una numero, una letra minuscula y una letra mayuscula'
      })
    })

    t.test('sign-up without a body answers 400', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/signup' })
      t.equal(response.statusCode, 400)
      t.strictSame(response.json(), { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición es obligatorio' })
    })

    t.test('duplicate e-mail and username (any case) answer 409 naming each field', async (t) => {
      const user = uniqueUser('dup')
      const created = await app.inject({ method: 'POST', url: '/auth/signup', payload: user })
      t.equal(created.statusCode, 201)
      t.strictSame(created.json(), { id: await storedId(app, user.email), username: user.username, email: user.email })
      const both = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...user, username: user.username.toUpperCase() } })
      t.equal(both.statusCode, 409)
      t.strictSame(both.json(), { email: 'El email ya está registrado', username: 'El username ya está en uso' })
      const emailOnly = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...user, username: 'otro' + user.username.slice(0, 10) } })
      t.equal(emailOnly.statusCode, 409)
      t.strictSame(emailOnly.json(), { email: 'El email ya está registrado' })
      const usernameOnly = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...user, email: 'otro.' + user.email } })
      t.equal(usernameOnly.statusCode, 409)
      t.strictSame(usernameOnly.json(), { username: 'El username ya está en uso' })
    })

    t.test('login answers 200 with exactly id, token, username and e-mail, and a §6 token', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'ADMIN@example.com', password: seedAccounts.admin.password } })
      const token = assertLoggedIn(t, response, seedAccounts.admin)
      t.equal(response.headers['cache-control'], 'no-store')
      t.strictSame(decodeHeader(token), { alg: 'HS256', typ: 'at+jwt' })
      const claims = decodeClaims(token)
      t.strictSame(claims, { sub: 'admin', role: 'ROLE_ADMIN', uid: 1, iss: 'user-management', aud: 'user-management', jti: claims.jti, iat: claims.iat, exp: claims.exp }, 'exactly the claims of §6')
      t.match(claims.jti, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
      t.ok(Number.isInteger(claims.iat) && Math.abs(claims.iat - Date.now() / 1000) < 60, 'iat is now, in seconds')
      t.equal(claims.exp - claims.iat, 86400)
    })

    t.test('wrong password and unknown e-mail get the same 401', async (t) => {
      const wrong = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: seedAccounts.user.email, password: 'Wrong12345' } })
      const unknown = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nadie@example.com', password: 'Wrong12345' } })
      assertBadCredentials(t, wrong, 'a wrong password')
      assertBadCredentials(t, unknown, 'an unknown e-mail')
      t.notOk(wrong.headers['www-authenticate'], 'login\'s 401 carries no WWW-Authenticate')
    })

    t.test('login validates presence, type and e-mail format only', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'x', password: 1 } })
      t.equal(response.statusCode, 400)
      t.strictSame(response.json(), { email: 'El email debe ser valido', password: 'La password debe ser un texto' })
      const weak = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'a@example.com', password: 'abc' } })
      assertBadCredentials(t, weak, 'a password that breaks the sign-up rules is still just checked')
    })
  })
}
