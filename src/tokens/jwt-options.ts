import type { JsonWebKey } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { FastifyJWTOptions, TokenOrHeader } from '@fastify/jwt'
import type { Config } from '../config.js'
import type { SigningKey } from './signing-keys.js'

type JwtSettings = Config['jwt']
type VerifyOptions = NonNullable<FastifyJWTOptions['verify']>

/** RFC 7517's JWK Set of the public keys other services verify our tokens with. */
export interface JwkSet {
  readonly keys: ReadonlyArray<Readonly<JsonWebKey & { kid: string, alg: string, use: 'sig' }>>
}

// Headers that name or carry a key other than ours (RFC 7515 §4.1.2-6). Our tokens never
// carry them, so their presence alone marks a forgery, whatever key it points to.
const FOREIGN_KEY_HEADERS = ['jku', 'jwk', 'x5u', 'x5c'] as const

/** The service's own keys, current first. */
const keysOf = (settings: JwtSettings): SigningKey[] =>
  settings.keys ? [settings.keys.current, settings.keys.previous].filter((key) => key !== undefined) : []

/** Signed by a key the header does not lead to among ours; mapped to 401 Token inválido. */
class UnknownKeyError extends Error {}

/**
 * @fastify/jwt's options for the configured algorithm. HS256 is one secret (its previous
 * secret is a second registration, see plugins/auth.ts). EdDSA and ES256 sign with the
 * current private key and verify with the public key the token's `kid` names among the
 * service's own keys, never one the token points to; the algorithm is pinned, so a token
 * HMAC-signed with a public key (algorithm confusion) is refused by fast-jwt.
 */
export function jwtOptions (settings: JwtSettings, verify: VerifyOptions): FastifyJWTOptions {
  const { algorithm, issuer: iss, audience: aud } = settings
  // @fastify/jwt reads a numeric expiresIn as seconds; jwt.expiration is in milliseconds.
  const sign = { algorithm, iss, aud, expiresIn: settings.expirationMs / 1000, header: { alg: algorithm, typ: 'at+jwt' } }
  if (!settings.keys) return { secret: settings.secret, sign, verify }

  const publicKeys = new Map(keysOf(settings).map((key) => [key.kid, key.publicKeyPem]))
  return {
    secret: {
      private: settings.keys.current.privateKeyPem,
      // The PEM string, not a KeyObject: @fastify/jwt then keeps one verifier, and its cache
      // of verified tokens, per key.
      public: async (_request: FastifyRequest, token: TokenOrHeader) => {
        // With decode.complete the callback gets the decoded token, not its bare header.
        const { header } = token as { header: Record<string, unknown> }
        const key = FOREIGN_KEY_HEADERS.some((name) => Object.hasOwn(header, name)) || typeof header.kid !== 'string'
          ? undefined
          : publicKeys.get(header.kid)
        if (key === undefined) throw new UnknownKeyError('token names no key of this service')
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
  return { keys: keysOf(settings).map((key) => ({ ...key.publicJwk, kid: key.kid, alg: settings.algorithm, use: 'sig' as const })) }
}
