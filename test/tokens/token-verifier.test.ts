import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { createSigner, TokenError } from 'fast-jwt'
import { loadConfig } from '../../src/config/index.js'
import { createTokenVerifier } from '../../src/tokens/token-verifier.js'

// EdDSA and ES256: the key a token's header names, among the service's own, and nothing else,
// whatever the token's header says or however often a header was seen.
const pkcs8 = (key: { export: Function }) => key.export({ format: 'pem', type: 'pkcs8' }) as string
const current = pkcs8(generateKeyPairSync('ed25519').privateKey)
const other = pkcs8(generateKeyPairSync('ed25519').privateKey)
const { jwt } = loadConfig({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: current })
const claims = { sub: 'ana@example.com', role: 'ROLE_USER', uid: 2, jti: 'j1' }
const sign = (key: string, header: Record<string, unknown>) =>
  createSigner({ key, algorithm: 'EdDSA', iss: jwt.issuer, aud: jwt.audience, expiresIn: 60_000, header: { alg: 'EdDSA', typ: 'at+jwt', ...header } })(claims)
const kid = jwt.keys!.current.kid
const segments = (token: string) => token.split('.')
/** The claims a token was accepted with, or why it was refused: fast-jwt's code, or the verifier's own "no key of ours". Anything else (a TypeError…) is thrown. */
const outcome = (verify: (token: string) => unknown, token: string) => {
  try {
    const { sub, uid } = verify(token) as { sub: string, uid: number }
    return { sub, uid }
  } catch (error) {
    if (error instanceof TokenError) return error.code
    if (error instanceof Error && error.constructor === Error && error.message === 'token names no key of this service') return NO_KEY
    throw error
  }
}
const { invalidSignature: BAD_SIGNATURE } = TokenError.codes
const NO_KEY = 'no key of ours'

t.test('a header segment already seen never vouches for a token it did not sign', async (t) => {
  const verify = createTokenVerifier(jwt)
  const genuine = sign(current, { kid })
  t.strictSame(outcome(verify, genuine), { sub: 'ana@example.com', uid: 2 })
  // The same header segment (our kid), signed by another key, or with its payload changed.
  const forged = sign(other, { kid })
  t.equal(segments(forged)[0], segments(genuine)[0], 'the forgery shares the genuine header segment')
  t.equal(outcome(verify, forged), BAD_SIGNATURE)
  const [header, , signature] = segments(genuine)
  const payload = Buffer.from(JSON.stringify({ ...claims, role: 'ROLE_ADMIN' })).toString('base64url')
  t.equal(outcome(verify, `${header}.${payload}.${signature}`), BAD_SIGNATURE)
  // Headers that name no key of ours, or carry one, stay refused after the genuine one was kept.
  t.equal(outcome(verify, sign(other, { kid: 'not-ours' })), NO_KEY)
  t.equal(outcome(verify, sign(current, {})), NO_KEY)
  t.equal(outcome(verify, sign(current, { kid, jku: 'https://attacker.example/jwks.json' })), NO_KEY)
  t.strictSame(outcome(verify, genuine), { sub: 'ana@example.com', uid: 2 })
})

t.test('headers that name our key in different words: every token is still checked in full', async (t) => {
  const verify = createTokenVerifier(jwt)
  // Twenty headers that name our key in different words: each a segment of its own.
  const tokens = Array.from({ length: 20 }, (_, i) => sign(current, { kid, n: i }))
  t.strictSame(tokens.map((token) => outcome(verify, token)), tokens.map(() => ({ sub: 'ana@example.com', uid: 2 })))
  t.strictSame(tokens.map((token) => outcome(verify, token.slice(0, -4) + 'AAAA')), tokens.map(() => BAD_SIGNATURE))
  t.equal(outcome(verify, sign(other, { kid, n: 19 })), BAD_SIGNATURE)
})
