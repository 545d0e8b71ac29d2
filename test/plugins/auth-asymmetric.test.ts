import { createHmac, createPublicKey, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { calculateJwkThumbprint } from 'jose'
import { DEV_JWT_SECRET } from '../../src/config/index.js'
import { build, login, seedAccounts, testDatabases, unauthorized } from '../helper.js'

// EdDSA and ES256 verification (CONTRACT §6 with JWT_ALGORITHM): tokens are made here by hand
// with node:crypto and kids by jose, never by the service's signer or thumbprint code.
type Algorithm = 'EdDSA' | 'ES256'

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const now = () => Math.floor(Date.now() / 1000)
const newKey = (algorithm: Algorithm) => (algorithm === 'EdDSA'
  ? generateKeyPairSync('ed25519')
  : generateKeyPairSync('ec', { namedCurve: 'P-256' })).privateKey
const kidOf = (key: KeyObject) => calculateJwkThumbprint(createPublicKey(key).export({ format: 'jwk' }) as never, 'sha256')

/** A compact JWS signed with `key` (JWS's raw r||s for ES256); `undefined` header members are left out. */
function forge (algorithm: Algorithm, key: KeyObject, header: Record<string, unknown>, claims: Record<string, unknown>): string {
  const input = `${b64(header)}.${b64(claims)}`
  const signature = algorithm === 'EdDSA'
    ? sign(null, Buffer.from(input), key)
    : sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' })
  return `${input}.${signature.toString('base64url')}`
}

const { user } = seedAccounts
function claimsOf (overrides: Record<string, unknown> = {}) {
  const iat = now()
  return { sub: user.username, role: user.role, uid: user.id, iss: 'user-management', aud: 'user-management', jti: randomUUID(), iat, exp: iat + 3600, ...overrides }
}
const userRecord = { id: user.id, username: user.username, email: user.email, role: user.role }

/** A web server that would hand out an attacker's keys, and counts who asked. */
async function keyServer (t: Test, jwks: unknown) {
  let requests = 0
  const server = createServer((_request, response) => {
    requests++
    response.setHeader('content-type', 'application/json').end(JSON.stringify(jwks))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`, requests: () => requests }
}

for (const kind of testDatabases()) {
  for (const algorithm of ['EdDSA', 'ES256'] as const) {
    t.test(`${algorithm} token verification on ${kind}`, async (t) => {
      const ours = newKey(algorithm)
      const kid = await kidOf(ours)
      const app = await build(t, kind, { env: { JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: ours.export({ format: 'pem', type: 'pkcs8' }) as string } })
      const header = { alg: algorithm, typ: 'at+jwt', kid }
      const foreign = newKey(algorithm)
      const foreignKid = await kidOf(foreign)
      const foreignJwk = { ...createPublicKey(foreign).export({ format: 'jwk' }), kid: foreignKid, alg: algorithm, use: 'sig' }

      async function answers (t: Test, token: string, status: number, body: unknown) {
        const response = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: `Bearer ${token}` } })
        t.equal(response.statusCode, status, 'status')
        t.strictSame(response.json(), body, 'body')
        if (status === 401) t.equal(response.headers['www-authenticate'], 'Bearer error="invalid_token"', 'WWW-Authenticate')
      }
      const refused = (t: Test, token: string, message = 'Token inválido') => answers(t, token, 401, unauthorized(message))

      t.test('a hand-made token of our key with its thumbprint as kid is accepted: the baseline', async (t) => {
        await answers(t, forge(algorithm, ours, header, claimsOf()), 200, userRecord)
      })

      t.test('a login\'s token carries alg, typ at+jwt and our kid, and is accepted', async (t) => {
        const token = await login(app, user.email, user.password)
        t.strictSame(JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString()), header)
        await answers(t, token, 200, userRecord)
      })

      t.test('tampered: claims changed under the signature, or the signature changed → 401', async (t) => {
        const [h, , s] = (await login(app, user.email, user.password)).split('.')
        await refused(t, `${h}.${b64(claimsOf({ role: 'ROLE_ADMIN' }))}.${s}`)
        const token = forge(algorithm, ours, header, claimsOf())
        const flipped = token.slice(0, -6) + (token.at(-6) === 'A' ? 'B' : 'A') + token.slice(-5)
        await refused(t, flipped)
      })

      t.test('a kid that is not ours, a foreign key under our kid, or no kid at all → 401', async (t) => {
        await refused(t, forge(algorithm, ours, { ...header, kid: foreignKid }, claimsOf()))
        await refused(t, forge(algorithm, ours, { ...header, kid: 'ours' }, claimsOf()))
        await refused(t, forge(algorithm, foreign, header, claimsOf()))
        await refused(t, forge(algorithm, ours, { alg: algorithm, typ: 'at+jwt' }, claimsOf()))
      })

      t.test('algorithm confusion: HS256 keyed with our public key (PEM or JWK) under our kid → 401', async (t) => {
        const publicKey = createPublicKey(ours)
        const secrets = [
          publicKey.export({ format: 'pem', type: 'spki' }) as string,
          JSON.stringify(publicKey.export({ format: 'jwk' })),
          JSON.stringify({ ...publicKey.export({ format: 'jwk' }), kid, alg: algorithm, use: 'sig' })
        ]
        for (const secret of secrets) {
          const input = `${b64({ alg: 'HS256', typ: 'at+jwt', kid })}.${b64(claimsOf())}`
          await refused(t, `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`)
        }
      })

      t.test('an HS256 token of the development secret, or alg none, → 401', async (t) => {
        const input = `${b64({ alg: 'HS256', typ: 'at+jwt' })}.${b64(claimsOf())}`
        await refused(t, `${input}.${createHmac('sha256', DEV_JWT_SECRET).update(input).digest('base64url')}`)
        await refused(t, `${b64({ alg: 'none', typ: 'at+jwt', kid })}.${b64(claimsOf())}.`)
      })

      t.test('jku, jwk, x5u, x5c: refused without fetching anything, whoever signed', async (t) => {
        const server = await keyServer(t, { keys: [foreignJwk] })
        const pointers: Record<string, unknown>[] = [
          { jku: server.url },
          { jwk: foreignJwk },
          { x5u: server.url },
          { x5c: ['MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'] }
        ]
        for (const pointer of pointers) {
          await refused(t, forge(algorithm, foreign, { ...header, kid: foreignKid, ...pointer }, claimsOf()))
          await refused(t, forge(algorithm, ours, { ...header, ...pointer }, claimsOf()))
        }
        t.equal(server.requests(), 0, 'the key server was never asked')
      })

      t.test('the rest of CONTRACT §6 holds: iss, aud, exp, typ, iat leeway, claims', async (t) => {
        await refused(t, forge(algorithm, ours, header, claimsOf({ iss: 'someone-else' })))
        await refused(t, forge(algorithm, ours, header, claimsOf({ aud: 'someone-else' })))
        await refused(t, forge(algorithm, ours, { ...header, typ: 'JWT' }, claimsOf()))
        await refused(t, forge(algorithm, ours, header, claimsOf({ iat: now() + 60, exp: now() + 3600 })))
        await refused(t, forge(algorithm, ours, header, claimsOf({ role: 'ROLE_ROOT' })))
        await refused(t, forge(algorithm, ours, header, claimsOf({ jti: undefined })))
        await refused(t, forge(algorithm, ours, header, claimsOf({ iat: now() - 7200, exp: now() - 1 })), 'Token expirado')
        await answers(t, forge(algorithm, ours, header, claimsOf({ iat: now() + 20, nbf: now() + 20 })), 200, userRecord)
      })

      t.test('an Authorization header over 4 KiB → 401 before any verification', async (t) => {
        await refused(t, forge(algorithm, ours, header, claimsOf({ pad: 'x'.repeat(4096) })))
      })
    })
  }
}
