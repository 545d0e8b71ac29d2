import { createDecoder, createVerifier } from 'fast-jwt'
import type { Config } from '../config/index.js'
import { ownKeys, ownPublicKey, verifyOptions } from './jwt-options.js'

type JwtSettings = Config['jwt']

/** A token's claims once its signature, algorithm, typ, issuer, audience, expiry and required claims are checked. */
export type VerifyToken = (token: string) => Record<string, unknown>

/** Header segments whose verifier is kept (EdDSA, ES256): the service's own make one per key. */
const MAX_KEPT_HEADERS = 8

/** fast-jwt's code of a well-signed token past its `exp`. */
export const isExpiredTokenError = (error: unknown) => (error as { code?: string }).code === 'FAST_JWT_EXPIRED'

/**
 * The request path's token check: fast-jwt verifiers made once per key of the service, each
 * caching the tokens it verified (`verifyOptions`: CONTRACT §6's checks). @fastify/jwt signs;
 * its per-request verification merged options, decoded every token and ran a waterfall of
 * callbacks before it reached the same cached verifier.
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
  // The tokens of one key share their header segment, so the verifier a header names is kept by
  // the segment's text: decoding it on every request took the check from about 5 to 8.5 µs.
  // Only headers that named a key of ours are kept, and only a few (a forger can vary them).
  const byHeader = new Map<string, VerifyToken>()
  return (token) => {
    const segment = token.slice(0, token.indexOf('.'))
    const known = byHeader.get(segment)
    if (known !== undefined) return known(token)
    const { header } = decode(token) as { header: Record<string, unknown> }
    const key = ownPublicKey(settings, header)
    // Like every other failure here, a 401 Token inválido.
    if (key === undefined) throw new Error('token names no key of this service')
    const verifier = verifiers.get(key)!
    if (byHeader.size < MAX_KEPT_HEADERS) byHeader.set(segment, verifier)
    return verifier(token)
  }
}
