import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, type JsonWebKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'

/** The token algorithms of JWT_ALGORITHM; the two asymmetric ones sign with JWT_PRIVATE_KEY. */
export const JWT_ALGORITHMS = ['HS256', 'EdDSA', 'ES256'] as const
export type JwtAlgorithm = typeof JWT_ALGORITHMS[number]
export type AsymmetricAlgorithm = Exclude<JwtAlgorithm, 'HS256'>

/** One key pair of the service, in the forms fast-jwt and the JWK Set take. */
export interface SigningKey {
  /** RFC 7638 thumbprint of the public key: the tokens' `kid`. */
  readonly kid: string
  /** PKCS#8 PEM, as node:crypto re-exports it (fast-jwt signs with a PEM string, not a KeyObject). */
  readonly privateKeyPem: string
  /** SPKI PEM; @fastify/jwt keeps one verifier (and its token cache) per key string. */
  readonly publicKeyPem: string
  /** The public JWK as node:crypto exports it (kty, crv, x and, for EC, y). */
  readonly publicJwk: Readonly<JsonWebKey>
}

/** What each algorithm demands of the key, as node:crypto names key types and curves. */
const KEY_KINDS: Record<AsymmetricAlgorithm, { type: string, curve?: string, text: string }> = {
  EdDSA: { type: 'ed25519', text: 'an Ed25519 key' },
  ES256: { type: 'ec', curve: 'prime256v1', text: 'an EC key on the P-256 curve' }
}

/** Why a key cannot be used; the configuration turns it into one line naming the variable. */
export class KeyProblem extends Error {}

/**
 * JWT_PRIVATE_KEY's value: the PEM itself when it starts with a PEM header, otherwise the
 * path of a file holding it (a mounted secret). The key must be a private key of the
 * algorithm's type; a public key or certificate is refused, never taken for a signing key.
 */
export function loadSigningKey (value: string, algorithm: AsymmetricAlgorithm): SigningKey {
  const pem = value.trimStart().startsWith('-----BEGIN ') ? value : readKeyFile(value)
  let privateKey: KeyObject
  try {
    privateKey = createPrivateKey({ key: pem, format: 'pem' })
  } catch (error) {
    throw new KeyProblem(isPublic(pem)
      ? 'holds a public key or certificate; it must be the private key (PKCS#8 PEM)'
      : `is not a readable unencrypted PKCS#8 PEM private key (${(error as { code?: string }).code ?? 'unreadable'})`)
  }
  const kind = KEY_KINDS[algorithm]
  const { asymmetricKeyType: type, asymmetricKeyDetails: details } = privateKey
  if (type !== kind.type || (kind.curve !== undefined && details?.namedCurve !== kind.curve)) {
    const found = details?.namedCurve ? `${type} (${details.namedCurve})` : String(type)
    throw new KeyProblem(`is of type ${found}; JWT_ALGORITHM=${algorithm} needs ${kind.text}`)
  }
  const publicKey = createPublicKey(privateKey)
  const publicJwk = publicKey.export({ format: 'jwk' })
  return {
    kid: jwkThumbprint(publicJwk),
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }) as string,
    publicJwk
  }
}

function readKeyFile (path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    // The value is not echoed: it may be key material pasted without its PEM header.
    throw new KeyProblem(`is neither a PEM key (starting with -----BEGIN) nor the path of a readable file (${(error as { code?: string }).code ?? 'unreadable'})`)
  }
}

function isPublic (pem: string): boolean {
  try {
    createPublicKey(pem)
    return true
  } catch {
    return false
  }
}

/**
 * RFC 7638: SHA-256 over the JSON of the key's required members in lexicographic order,
 * no white space. node:crypto exports the JWK but computes no thumbprint.
 */
export function jwkThumbprint (jwk: JsonWebKey): string {
  const { crv, kty, x, y } = jwk
  const members = kty === 'EC' ? { crv, kty, x, y } : { crv, kty, x }
  return createHash('sha256').update(JSON.stringify(members)).digest('base64url')
}

/**
 * The key of the HMACs that are not tokens (e-mail digests in logs and limiter keys), derived
 * from the signing key with HKDF: stable across restarts and instances, changed only when the
 * key rotates, and never the token key itself, so no HMAC in a log is one the token key would
 * make (an HS256 signature is HMAC-SHA256 under JWT_SECRET).
 */
export function digestKeyFrom (signingMaterial: string | Buffer): string {
  return Buffer.from(hkdfSync('sha256', signingMaterial, '', 'user-management e-mail digest', 32)).toString('hex')
}

/** The digest key of an EdDSA or ES256 key: from its private key, whatever PEM form it came in. */
export function digestKeyOf (key: SigningKey): string {
  return digestKeyFrom(createPrivateKey(key.privateKeyPem).export({ format: 'der', type: 'pkcs8' }))
}

/** A new private key for `algorithm`, PKCS#8 PEM (`npm run cli -- generate-key`). */
export function generatePrivateKeyPem (algorithm: AsymmetricAlgorithm): string {
  const { privateKey } = algorithm === 'EdDSA'
    ? generateKeyPairSync('ed25519')
    : generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return privateKey.export({ format: 'pem', type: 'pkcs8' }) as string
}
