import type { JsonWebKey } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { FastifyJWTOptions, TokenOrHeader } from '@fastify/jwt'
import type { Config } from '../config/index.js'
import type { SigningKey } from '../config/signing-keys.js'

type JwtSettings = Config['jwt']

/** RFC 7517's JWK Set of the public keys other services verify our tokens with. */
export interface JwkSet {
  readonly keys: ReadonlyArray<Readonly<JsonWebKey & { kid: string, alg: string, use: 'sig' }>>
}

// Headers that name or carry a key other than ours (RFC 7515 §4.1.2-6). Our tokens never
// carry them, so their presence alone marks a forgery, whatever key it points to.
const FOREIGN_KEY_HEADERS = ['jku', 'jwk', 'x5u', 'x5c'] as const

/** The service's own keys, current first. */
export const ownKeys = (settings: JwtSettings): SigningKey[] =>
  settings.keys ? [settings.keys.current, settings.keys.previous].filter((key) => key !== undefined) : []

/** CONTRACT §6's checks of a token, for tokens/token-verifier.ts and @fastify/jwt alike. */
export function verifyOptions (settings: JwtSettings) {
  return {
    // Pinned: a token's own alg never chooses how it is checked.
    algorithms: [settings.algorithm],
    allowedIss: settings.issuer,
    allowedAud: settings.audience,
    checkTyp: 'at+jwt',
    requiredClaims: ['sub', 'role', 'uid', 'iss', 'aud', 'jti', 'iat', 'exp'],
    // nbf gets the same 30 s of leeway as iat, checked in plugins/auth.ts; exp gets none.
    ignoreNotBefore: true,
    cache: 1000
  }
}

/**
 * EdDSA and ES256: the public key (SPKI PEM) the header's `kid` names among the service's own
 * keys, current or previous; undefined for a header without one, naming another, or carrying
 * a key or a link to one. With HS256, undefined.
 */
export function ownPublicKey (settings: JwtSettings, header: Record<string, unknown>): string | undefined {
  if (FOREIGN_KEY_HEADERS.some((name) => Object.hasOwn(header, name)) || typeof header.kid !== 'string') return undefined
  return ownKeys(settings).find((key) => key.kid === header.kid)?.publicKeyPem
}

/**
 * @fastify/jwt's options for the configured algorithm. It signs the tokens; requests are
 * checked by tokens/token-verifier.ts. @fastify/jwt's own verification, which the service does
 * not call, is held to the same checks and keys, HS256's previous secret aside. HS256 is one
 * secret; EdDSA and ES256 sign with the current private key.
 */
export function jwtOptions (settings: JwtSettings): FastifyJWTOptions {
  const { algorithm, issuer: iss, audience: aud } = settings
  // @fastify/jwt reads a numeric expiresIn as seconds; jwt.expiration is in milliseconds.
  const sign = { algorithm, iss, aud, expiresIn: settings.expirationMs / 1000, header: { alg: algorithm, typ: 'at+jwt' } }
  const verify = verifyOptions(settings)
  if (!settings.keys) return { secret: settings.secret, sign, verify }
  return {
    secret: {
      private: settings.keys.current.privateKeyPem,
      public: async (_request: FastifyRequest, token: TokenOrHeader) => {
        // With decode.complete the callback gets the decoded token, not its bare header.
        const key = ownPublicKey(settings, (token as { header: Record<string, unknown> }).header)
        if (key === undefined) throw new Error('token names no key of this service')
        return key
      }
    },
    sign: { ...sign, kid: settings.keys.current.kid },
    verify,
    // The key callback needs the header, not just the claims.
    decode: { complete: true }
  }
}

/** The public keys, current and previous, as GET /.well-known/jwks.json serves them; empty with HS256. */
export function jwkSet (settings: JwtSettings): JwkSet {
  return { keys: ownKeys(settings).map((key) => ({ ...key.publicJwk, kid: key.kid, alg: settings.algorithm, use: 'sig' as const })) }
}
