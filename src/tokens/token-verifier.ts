import { createDecoder, createVerifier } from 'fast-jwt'
import type { Config } from '../config/index.js'
import { ownKeys, ownPublicKey, verifyOptions } from './jwt-options.js'

type JwtSettings = Config['jwt']

/** A token's claims once its signature, algorithm, typ, issuer, audience, expiry and required claims are checked. */
export type VerifyToken = (token: string) => Record<string, unknown>

/** fast-jwt's code of a well-signed token past its `exp`. */
export const isExpiredTokenError = (error: unknown) => (error as { code?: string }).code === 'FAST_JWT_EXPIRED'

/**
 * The request path's token check: fast-jwt verifiers made once per key of the service, each
 * caching the tokens it verified (`verifyOptions`: CONTRACT §6's checks). @fastify/jwt signs,
 * but requests are not checked with its `request.jwtVerify()`: that merges options, decodes
 * the token and runs callbacks on every request before it reaches a verifier like these
 * (measured against this one: docs/performance.md, "Own code or the library's"), and it has
 * no fallback to a previous HS256 secret.
 * HS256 tries the previous secret after the current one; EdDSA and ES256 pick the verifier by
 * the token's `kid` among the service's own keys, never a key the token points to.
 */
export function createTokenVerifier (settings: JwtSettings): VerifyToken {
  const options = verifyOptions(settings)
  if (!settings.keys) {
    const current = createVerifier({ ...options, key: settings.secret })
    if (!settings.previousSecret) return current
    const previous = createVerifier({ ...options, key: settings.previousSecret })
    return (token) => {
      try {
        return current(token)
      } catch (error) {
        // An expired token passed its signature check already: no other secret can save it.
        if (isExpiredTokenError(error)) throw error
        try {
          return previous(token)
        } catch (previousError) {
          // Signed with the former secret but expired: say so, rather than "invalid".
          throw isExpiredTokenError(previousError) ? previousError : error
        }
      }
    }
  }
  // One verifier per public key (current and previous), by its PEM as ownPublicKey returns it.
  const verifiers = new Map(ownKeys(settings).map(({ publicKeyPem: key }) => [key, createVerifier({ ...options, key })]))
  const decode = createDecoder({ complete: true })
  return (token) => {
    const { header } = decode(token) as { header: Record<string, unknown> }
    const key = ownPublicKey(settings, header)
    // Like every other failure here, a 401 Token inválido.
    if (key === undefined) throw new Error('token names no key of this service')
    return verifiers.get(key)!(token)
  }
}
