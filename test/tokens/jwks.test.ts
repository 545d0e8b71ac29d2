import { generateKeyPairSync } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, calculateJwkThumbprint, errors } from 'jose'
import type { App } from '../../src/app.js'
import { buildCheckedApp } from '../openapi/conformance.js'
import { buildManagementApp } from '../../src/management/management-app.js'
import type { Database } from '../../src/db/database.js'
import { createTestDatabase, login, seedAccounts, testConfig, testDatabases } from '../helper.js'

// The other services' side of CONTRACT §6 in EdDSA and ES256 mode: a verifier that is not our
// code (jose) gets the keys only from the management listener's JWKS over HTTP.
const { user } = seedAccounts
const ISSUER = 'user-management'
const pem = (algorithm: 'EdDSA' | 'ES256') => (algorithm === 'EdDSA'
  ? generateKeyPairSync('ed25519')
  : generateKeyPairSync('ec', { namedCurve: 'P-256' })).privateKey.export({ format: 'pem', type: 'pkcs8' }) as string

/** The API with `env` over `database`, and its management listener on a port of the kernel's choice. */
async function service (t: Test, database: Database, env: Record<string, string>, seed = false) {
  const api = await buildCheckedApp(testConfig(env), { database, seed })
  t.teardown(() => api.close())
  const management = await buildManagementApp({ api, isShuttingDown: () => false })
  t.teardown(() => management.close())
  await management.listen({ port: 0, host: '127.0.0.1' })
  const jwksUrl = new URL(`http://127.0.0.1:${(management.server.address() as AddressInfo).port}/.well-known/jwks.json`)
  return { api, management, jwksUrl }
}

/** jose's verification, as README's example does it: only the JWKS URL, the issuer and the audience. */
const verifyWithJose = (token: string, jwksUrl: URL) =>
  jwtVerify(token, createRemoteJWKSet(jwksUrl), { issuer: ISSUER, audience: ISSUER, typ: 'at+jwt' })

const me = (api: App, token: string) => api.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
const userRecord = { id: user.id, username: user.username, email: user.email, role: user.role }
const invalid = { statusCode: 401, error: 'Unauthorized', message: 'Token inválido' }

for (const kind of testDatabases()) {
  for (const algorithm of ['EdDSA', 'ES256'] as const) {
    t.test(`${algorithm} tokens and the JWKS on ${kind}`, async (t) => {
      const { database } = await createTestDatabase(t, kind)
      const oldKey = pem(algorithm)
      const newKey = pem(algorithm)
      const before = await service(t, database, { JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: oldKey }, true)
      const oldToken = await login(before.api, user.email, user.password)
      const oldKid = before.api.jwks.keys[0].kid

      t.test('jose accepts a login\'s token with only the JWKS URL, the issuer and the audience', async (t) => {
        const { payload, protectedHeader } = await verifyWithJose(oldToken, before.jwksUrl)
        t.strictSame(protectedHeader, { alg: algorithm, typ: 'at+jwt', kid: oldKid })
        t.strictSame(Object.keys(payload).sort(), ['aud', 'exp', 'iat', 'iss', 'jti', 'role', 'sub', 'uid'])
        t.match(payload, { sub: user.username, role: user.role, uid: user.id, iss: ISSUER, aud: ISSUER })
        t.equal((payload.exp as number) - (payload.iat as number), 86_400, 'JWT_EXPIRATION, in seconds')
      })

      t.test('the JWKS: one public key with kid = its RFC 7638 thumbprint, alg, use; cached 5 minutes', async (t) => {
        const response = await fetch(before.jwksUrl)
        t.equal(response.status, 200)
        t.equal(response.headers.get('cache-control'), 'max-age=300')
        t.match(response.headers.get('content-type'), /^application\/json/)
        const body = await response.json() as { keys: Array<Record<string, string>> }
        t.equal(body.keys.length, 1)
        const [key] = body.keys
        t.strictSame(Object.keys(key).sort(), algorithm === 'EdDSA'
          ? ['alg', 'crv', 'kid', 'kty', 'use', 'x']
          : ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y'], 'public members only, never d')
        t.match(key, algorithm === 'EdDSA' ? { kty: 'OKP', crv: 'Ed25519' } : { kty: 'EC', crv: 'P-256' })
        t.equal(key.alg, algorithm)
        t.equal(key.use, 'sig')
        t.equal(key.kid, await calculateJwkThumbprint(key, 'sha256'), 'jose computes the same thumbprint')
        t.equal(decodeProtectedHeader(oldToken).kid, key.kid)
      })

      t.test('rotation: the previous key\'s tokens stay accepted and its key published; once dropped, refused', async (t) => {
        const rotating = await service(t, database, { JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: newKey, JWT_PRIVATE_KEY_PREVIOUS: oldKey })
        const newToken = await login(rotating.api, user.email, user.password)
        const newKid = decodeProtectedHeader(newToken).kid
        t.not(newKid, oldKid, 'new tokens carry the new key\'s kid')
        const jwks = await (await fetch(rotating.jwksUrl)).json() as { keys: Array<{ kid: string }> }
        t.strictSame(jwks.keys.map((key) => key.kid), [newKid, oldKid], 'current first, then previous')

        for (const [name, token] of [['old', oldToken], ['new', newToken]]) {
          const response = await me(rotating.api, token)
          t.equal(response.statusCode, 200, `${name} token: status`)
          t.strictSame(response.json(), userRecord, `${name} token: body`)
          t.equal((await verifyWithJose(token, rotating.jwksUrl)).payload.sub, user.username, `${name} token: jose`)
        }

        const after = await service(t, database, { JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: newKey })
        const dropped = await me(after.api, oldToken)
        t.equal(dropped.statusCode, 401)
        t.strictSame(dropped.json(), invalid)
        await t.rejects(verifyWithJose(oldToken, after.jwksUrl), errors.JWKSNoMatchingKey, 'jose finds no key for it either')
        const current = await me(after.api, newToken)
        t.equal(current.statusCode, 200)
        t.strictSame(current.json(), userRecord)
      })
    })
  }

  t.test(`HS256 (the default) publishes an empty JWK Set on ${kind}`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const { jwksUrl } = await service(t, database, {}, true)
    const response = await fetch(jwksUrl)
    t.equal(response.status, 200)
    t.equal(response.headers.get('cache-control'), 'max-age=300')
    t.strictSame(await response.json(), { keys: [] })
  })
}
