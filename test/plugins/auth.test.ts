import { createHmac, createSign, generateKeyPairSync, randomUUID } from 'node:crypto'
import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { users } from '../../src/db/schema.js'
import { build, login, seedAccounts, testDatabases, unauthorized, uniqueUser } from '../helper.js'

// Tokens are made here by hand with node:crypto, never with the service's signer, so a bug
// shared by signer and verifier cannot hide (CONTRACT §6).
const SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz'
const OLD_SECRET = 'old-secret-9876543210-zyxwvutsrqponmlkjihgfedcba'
const OTHER_SECRET = 'not-the-secret-00000000000000000000000000000000'

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
const now = () => Math.floor(Date.now() / 1000)

interface Forge { header?: Record<string, unknown>, claims?: Record<string, unknown>, secret?: string, hash?: string }

/** A compact JWS: HMAC over `header.claims`; `undefined` claims are left out. */
function forge ({ header = { alg: 'HS256', typ: 'at+jwt' }, claims = {}, secret = SECRET, hash = 'sha256' }: Forge = {}): string {
  const input = `${b64(header)}.${b64(claims)}`
  return `${input}.${createHmac(hash, secret).update(input).digest('base64url')}`
}

/** The claims of a valid token for `account`, with `overrides` applied. */
function claimsOf (account: { id: number, username: string, role: string }, overrides: Record<string, unknown> = {}) {
  const iat = now()
  return { sub: account.username, role: account.role, uid: account.id, iss: 'user-management', aud: 'user-management', jti: randomUUID(), iat, exp: iat + 3600, ...overrides }
}

const { user, admin } = seedAccounts
const forbidden = { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' }
const notFound = { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }
const userRecord = { id: user.id, username: user.username, email: user.email, role: user.role }
const adminRecord = { id: admin.id, username: admin.username, email: admin.email, role: admin.role }
const INVALID = 'Bearer error="invalid_token"'

for (const kind of testDatabases()) {
  t.test(`token verification on ${kind}`, async (t) => {
    const app = await build(t, kind, { env: { JWT_SECRET: SECRET } })
    const me = (headers: Record<string, string> = {}, url = '/users/me') => app.inject({ method: 'GET', url, headers })
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

    /** 401 with the contract's body and challenge. */
    async function rejects (t: Test, headers: Record<string, string>, message: string, challenge: string, url?: string) {
      const response = await me(headers, url)
      t.equal(response.statusCode, 401, 'status')
      t.strictSame(response.json(), unauthorized(message), 'body')
      t.equal(response.headers['www-authenticate'], challenge, 'WWW-Authenticate')
    }
    async function accepts (t: Test, headers: Record<string, string>) {
      const response = await me(headers)
      t.equal(response.statusCode, 200, 'status')
      t.strictSame(response.json(), userRecord, 'body')
    }

    t.test('a hand-made valid token is accepted: the baseline every other case differs from', async (t) => {
      await accepts(t, bearer(forge({ claims: claimsOf(user) })))
    })

    t.test('no Authorization header → Token ausente, bare Bearer challenge', async (t) => {
      await rejects(t, {}, 'Token ausente', 'Bearer')
    })

    t.test('alg none, even with the right claims and no signature → 401', async (t) => {
      const input = `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claimsOf(user))}`
      await rejects(t, bearer(`${input}.`), 'Token inválido', INVALID)
      await rejects(t, bearer(`${input}.${createHmac('sha256', SECRET).update(input).digest('base64url')}`), 'Token inválido', INVALID)
    })

    t.test('HS512 with the right secret → 401', async (t) => {
      await rejects(t, bearer(forge({ header: { alg: 'HS512', typ: 'at+jwt' }, claims: claimsOf(user), hash: 'sha512' })), 'Token inválido', INVALID)
    })

    t.test('RS256, really signed with RSA or HMAC-signed under an RS256 header → 401', async (t) => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
      const input = `${b64({ alg: 'RS256', typ: 'at+jwt' })}.${b64(claimsOf(user))}`
      const rsa = `${input}.${createSign('RSA-SHA256').update(input).sign(privateKey).toString('base64url')}`
      await rejects(t, bearer(rsa), 'Token inválido', INVALID)
      await rejects(t, bearer(forge({ header: { alg: 'RS256', typ: 'at+jwt' }, claims: claimsOf(user) })), 'Token inválido', INVALID)
    })

    t.test('a tampered signature, tampered claims and a wrong secret → 401', async (t) => {
      const token = forge({ claims: claimsOf(user) })
      const last = token.at(-2) === 'A' ? 'B' : 'A'
      await rejects(t, bearer(token.slice(0, -2) + last + token.at(-1)), 'Token inválido', INVALID)
      const [header, , signature] = token.split('.')
      await rejects(t, bearer(`${header}.${b64(claimsOf(admin))}.${signature}`), 'Token inválido', INVALID)
      await rejects(t, bearer(forge({ claims: claimsOf(user), secret: OTHER_SECRET })), 'Token inválido', INVALID)
    })

    // An HS256 signature is 32 bytes in 43 characters: the last one's two low bits are padding. Set,
    // the same bytes decode, so another string would pass for the same token (CONTRACT §6: only
    // the compact form, which base64url writes with those bits clear).
    t.test('a signature whose padding bits are set is another string for the same bytes → 401', async (t) => {
      const token = forge({ claims: claimsOf(user) })
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
      const variant = token.slice(0, -1) + alphabet[alphabet.indexOf(token.at(-1)!) | 1]
      t.strictSame(Buffer.from(variant.split('.')[2], 'base64url'), Buffer.from(token.split('.')[2], 'base64url'), 'the same signature bytes')
      await accepts(t, bearer(token))
      await rejects(t, bearer(variant), 'Token inválido', INVALID)
      // 45 characters: one past a whole group of four, which no byte string encodes to.
      await rejects(t, bearer(token + 'AA'), 'Token inválido', INVALID)
    })

    for (const claim of ['sub', 'role', 'uid', 'iss', 'aud', 'jti', 'iat', 'exp']) {
      t.test(`a token without ${claim} → 401`, async (t) => {
        await rejects(t, bearer(forge({ claims: claimsOf(user, { [claim]: undefined }) })), 'Token inválido', INVALID)
      })
    }

    t.test('wrong iss, wrong aud, wrongly typed claims → 401', async (t) => {
      for (const overrides of [{ iss: 'someone-else' }, { aud: 'another-service' }, { uid: String(user.id) }, { uid: 2 ** 40 }, { sub: 7 }, { jti: 5 }, { iat: 'now' }]) {
        await t.test(JSON.stringify(overrides), async (t) => {
          await rejects(t, bearer(forge({ claims: claimsOf(user, overrides) })), 'Token inválido', INVALID)
        })
      }
    })

    t.test('typ missing, JWT or anything but at+jwt → 401', async (t) => {
      for (const header of [{ alg: 'HS256' }, { alg: 'HS256', typ: 'JWT' }, { alg: 'HS256', typ: 'at+jwt+x' }]) {
        await rejects(t, bearer(forge({ header, claims: claimsOf(user) })), 'Token inválido', INVALID)
      }
    })

    t.test('an expired token → Token expirado, with no leeway on exp', async (t) => {
      await rejects(t, bearer(forge({ claims: claimsOf(user, { iat: now() - 3600, exp: now() - 1 }) })), 'Token expirado', INVALID)
      await accepts(t, bearer(forge({ claims: claimsOf(user, { exp: now() + 2 }) })))
    })

    t.test('nbf or iat more than 30 s ahead → 401; 10 s ahead is clock skew, accepted', async (t) => {
      // ceil: the server's clock has moved on since, so 31 s stays more than 30 s ahead.
      const ahead = (seconds: number) => Math.ceil(Date.now() / 1000) + seconds
      await rejects(t, bearer(forge({ claims: claimsOf(user, { nbf: ahead(31) }) })), 'Token inválido', INVALID)
      await rejects(t, bearer(forge({ claims: claimsOf(user, { iat: ahead(31) }) })), 'Token inválido', INVALID)
      await rejects(t, bearer(forge({ claims: claimsOf(user, { nbf: 'soon' }) })), 'Token inválido', INVALID)
      await accepts(t, bearer(forge({ claims: claimsOf(user, { nbf: now() + 10 }) })))
      await accepts(t, bearer(forge({ claims: claimsOf(user, { iat: now() + 10 }) })))
    })

    t.test('an unknown role → 401, not 403', async (t) => {
      for (const role of ['ROLE_ROOT', 'role_user', ['ROLE_USER'], null]) {
        await rejects(t, bearer(forge({ claims: claimsOf(user, { role }) })), 'Token inválido', INVALID)
      }
    })

    t.test('the uid of a deleted user → 401 on every protected path', async (t) => {
      const account = uniqueUser('del')
      const signup = await app.inject({ method: 'POST', url: '/auth/signup', payload: account })
      t.equal(signup.statusCode, 201)
      const created = signup.json()
      const [stored] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email))
      t.strictSame(created, { id: stored.id, username: account.username, email: account.email })
      const token = forge({ claims: claimsOf({ id: created.id, username: account.username, role: 'ROLE_USER' }) })
      const before = await me(bearer(token))
      t.equal(before.statusCode, 200, 'valid while the user exists')
      t.strictSame(before.json(), { id: created.id, username: account.username, email: account.email, role: 'ROLE_USER' })
      await app.database.db.delete(users).where(eq(users.id, created.id))
      await rejects(t, bearer(token), 'Token inválido', INVALID)
      await rejects(t, bearer(token), 'Token inválido', INVALID, '/no/such/path')
      const never = forge({ claims: claimsOf({ id: 999_999, username: 'ghost', role: 'ROLE_ADMIN' }) })
      await rejects(t, bearer(never), 'Token inválido', INVALID, '/admin/users')
    })

    // CONTRACT §6: sub is the username of the account uid names; any other is a wrong claim.
    t.test('a sub that is not the username of the uid\'s account → 401', async (t) => {
      for (const sub of ['someoneelse', user.username.toUpperCase(), `${user.username} `]) {
        await rejects(t, bearer(forge({ claims: claimsOf(user, { sub }) })), 'Token inválido', INVALID)
      }
      await accepts(t, bearer(forge({ claims: claimsOf(user) })))
    })

    t.test('malformed Authorization headers', async (t) => {
      const token = forge({ claims: claimsOf(user) })
      await t.test('no scheme, another scheme, a bare Bearer: no token was sent', async (t) => {
        await rejects(t, { authorization: token }, 'Token ausente', 'Bearer')
        await rejects(t, { authorization: 'Basic dXNlckBleGFtcGxlLmNvbTpVc2VyMTIzNDU=' }, 'Token ausente', 'Bearer')
        await rejects(t, { authorization: `Token ${token}` }, 'Token ausente', 'Bearer')
        await rejects(t, { authorization: 'Bearer' }, 'Token ausente', 'Bearer')
      })
      await t.test('two spaces, a tab, extra words, not three segments: a malformed token', async (t) => {
        await rejects(t, { authorization: `Bearer  ${token}` }, 'Token inválido', INVALID)
        await rejects(t, { authorization: `Bearer\t${token}` }, 'Token inválido', INVALID)
        await rejects(t, { authorization: `Bearer ${token} extra` }, 'Token inválido', INVALID)
        await rejects(t, { authorization: `Bearer ${token}.more` }, 'Token inválido', INVALID)
        await rejects(t, { authorization: 'Bearer abc' }, 'Token inválido', INVALID)
      })
      await t.test('the scheme word in any case is accepted', async (t) => {
        await accepts(t, { authorization: `bearer ${token}` })
        await accepts(t, { authorization: `BEARER ${token}` })
      })
    })

    t.test('an Authorization header over 4 KiB → 401 even when its token is valid', async (t) => {
      const header = (padding: number) => `Bearer ${forge({ claims: claimsOf(user, { pad: 'x'.repeat(padding) }) })}`
      let padding = 1000
      while (header(padding + 1).length <= 4096) padding++
      const fits = header(padding)
      t.ok(fits.length <= 4096 && fits.length > 4090, `largest header tried: ${fits.length} bytes`)
      await accepts(t, { authorization: fits })
      const over = header(padding + 3)
      t.ok(over.length > 4096)
      await rejects(t, { authorization: over }, 'Token inválido', INVALID)
    })

    t.test('tokens in the query string or a cookie are never read', async (t) => {
      const token = forge({ claims: claimsOf(user) })
      await rejects(t, {}, 'Token ausente', 'Bearer', `/users/me?access_token=${token}`)
      await rejects(t, {}, 'Token ausente', 'Bearer', `/users/me?token=${token}`)
      await rejects(t, { cookie: `token=${token}; access_token=${token}; jwt=${token}` }, 'Token ausente', 'Bearer')
    })

    t.test('kid, jku, jwk, x5u and x5c are ignored: the configured secret still decides', async (t) => {
      const header = { alg: 'HS256', typ: 'at+jwt', kid: 'attacker-key', jku: 'https://attacker.example/jwks.json', jwk: { kty: 'oct', k: b64(OTHER_SECRET) }, x5u: 'https://attacker.example/cert.pem', x5c: ['MIIB'] }
      await accepts(t, bearer(forge({ header, claims: claimsOf(user) })))
      await rejects(t, bearer(forge({ header, claims: claimsOf(user), secret: OTHER_SECRET })), 'Token inválido', INVALID)
    })

    t.test('a token from the old secret is refused when JWT_SECRET_PREVIOUS is not set', async (t) => {
      await rejects(t, bearer(forge({ claims: claimsOf(user), secret: OLD_SECRET })), 'Token inválido', INVALID)
    })

    t.test('a failure that is not the token\'s carries no challenge', async (t) => {
      const findById = app.usersRepository.findById
      app.usersRepository.findById = async () => { throw new Error('boom') }
      t.teardown(() => { app.usersRepository.findById = findById })
      const response = await me(bearer(forge({ claims: claimsOf(user) })))
      t.equal(response.statusCode, 500)
      t.strictSame(response.json(), { statusCode: 500, error: 'Internal Server Error', message: 'Error interno del servidor' })
      t.notOk(response.headers['www-authenticate'])
    })
  })

  t.test(`secret rotation with JWT_SECRET_PREVIOUS on ${kind}`, async (t) => {
    const app = await build(t, kind, { env: { JWT_SECRET: SECRET, JWT_SECRET_PREVIOUS: OLD_SECRET } })
    const me = (token: string) => app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })

    t.test('tokens signed with the previous and with the current secret are both accepted', async (t) => {
      for (const secret of [OLD_SECRET, SECRET]) {
        const response = await me(forge({ claims: claimsOf(user), secret }))
        t.equal(response.statusCode, 200)
        t.strictSame(response.json(), userRecord)
      }
    })

    t.test('login signs with the current secret only', async (t) => {
      const token = await login(app, user.email, user.password)
      const [header, claims, signature] = token.split('.')
      t.equal(createHmac('sha256', SECRET).update(`${header}.${claims}`).digest('base64url'), signature)
      const response = await me(token)
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), userRecord)
    })

    t.test('a third secret is still refused, and an old expired token is reported expired', async (t) => {
      const other = await me(forge({ claims: claimsOf(user), secret: OTHER_SECRET }))
      t.equal(other.statusCode, 401)
      t.strictSame(other.json(), unauthorized('Token inválido'))
      t.equal(other.headers['www-authenticate'], INVALID)
      const expired = await me(forge({ claims: claimsOf(user, { iat: now() - 7200, exp: now() - 60 }), secret: OLD_SECRET }))
      t.equal(expired.statusCode, 401)
      t.strictSame(expired.json(), unauthorized('Token expirado'))
      t.equal(expired.headers['www-authenticate'], INVALID)
      const wrongAudience = await me(forge({ claims: claimsOf(user, { aud: 'x' }), secret: OLD_SECRET }))
      t.equal(wrongAudience.statusCode, 401)
      t.strictSame(wrongAudience.json(), unauthorized('Token inválido'))
    })
  })

  t.test(`role matrix on ${kind}`, async (t) => {
    const app = await build(t, kind)
    const get = (url: string, token?: string) => app.inject({ method: 'GET', url, headers: token ? { authorization: `Bearer ${token}` } : {} })
    const userToken = await login(app, user.email, user.password)
    const adminToken = await login(app, admin.email, admin.password)

    const matrix: Array<[string, string | undefined, number, unknown]> = [
      ['/users/me', userToken, 200, userRecord],
      ['/users/me', adminToken, 403, forbidden],
      ['/users/me', undefined, 401, unauthorized('Token ausente')],
      ['/admin/users', userToken, 403, forbidden],
      ['/admin/users', adminToken, 200, [adminRecord, userRecord]],
      ['/admin/users', undefined, 401, unauthorized('Token ausente')],
      ['/no/such/path', userToken, 404, notFound],
      ['/no/such/path', adminToken, 404, notFound],
      ['/no/such/path', undefined, 401, unauthorized('Token ausente')],
      ['/users/other', userToken, 404, notFound],
      ['/auth/no-such-path', userToken, 404, notFound],
      ['/auth/no-such-path', adminToken, 404, notFound],
      ['/auth/no-such-path', undefined, 404, notFound],
      ['/auth/no-such-path', 'not.a.token', 404, notFound]
    ]
    for (const [url, token, status, body] of matrix) {
      const who = token === userToken ? 'user' : token === adminToken ? 'admin' : token ? 'garbage' : 'no'
      t.test(`${who} token → GET ${url}: ${status}`, async (t) => {
        const response = await get(url, token)
        t.equal(response.statusCode, status)
        t.strictSame(response.json(), body)
        t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
        t.equal(response.headers['www-authenticate'], status === 401 ? 'Bearer' : undefined)
      })
    }

    t.test('a role changed in the database acts at the next login, not on issued tokens', async (t) => {
      await app.database.db.update(users).set({ role: 'ROLE_ADMIN' }).where(eq(users.id, user.id))
      t.teardown(() => app.database.db.update(users).set({ role: 'ROLE_USER' }).where(eq(users.id, user.id)))
      // The old token keeps ROLE_USER: /users/me still answers, with the role as stored now.
      const meOld = await get('/users/me', userToken)
      t.equal(meOld.statusCode, 200)
      t.strictSame(meOld.json(), { ...userRecord, role: 'ROLE_ADMIN' })
      const listOld = await get('/admin/users', userToken)
      t.equal(listOld.statusCode, 403)
      t.strictSame(listOld.json(), forbidden)

      const fresh = await login(app, user.email, user.password)
      const listNew = await get('/admin/users', fresh)
      t.equal(listNew.statusCode, 200)
      t.strictSame(listNew.json(), [adminRecord, { ...userRecord, role: 'ROLE_ADMIN' }])
      const meNew = await get('/users/me', fresh)
      t.equal(meNew.statusCode, 403)
      t.strictSame(meNew.json(), forbidden)
    })
  })
}
