import fp from 'fastify-plugin'
import jwt from '@fastify/jwt'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/index.js'
import { ForbiddenError, TokenExpiredError, TokenInvalidError, TokenMissingError } from '../http/errors.js'
import type { UserRecord } from '../schemas/users.js'
import { ROLES, type Role } from '../schemas/roles.js'
import { MAX_USER_ID } from '../users/user.js'
import { requestSecurityEvent } from '../telemetry/security-events.js'
import { jwkSet, jwtOptions, type JwkSet } from '../tokens/jwt-options.js'
import { createTokenVerifier, isExpiredTokenError } from '../tokens/token-verifier.js'

/** The claims of an access token (CONTRACT §6). */
export interface TokenClaims {
  sub: string
  role: Role
  uid: number
  iss?: string
  aud?: string
  jti?: string
  iat?: number
  exp?: number
  nbf?: number
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: Pick<TokenClaims, 'sub' | 'role' | 'uid' | 'jti'>
    user: TokenClaims
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route needs no token (everything under /auth/). */
    public?: boolean
    /** The exact role a token must carry for this route. */
    role?: Role
  }
  interface FastifyInstance {
    /** The public keys of the tokens, for the management listener's /.well-known/jwks.json. */
    jwks: JwkSet
  }
  interface FastifyRequest {
    /** The token's user as stored now, looked up once per authenticated request. */
    account: UserRecord | null
  }
}

const MAX_AUTHORIZATION_BYTES = 4096
const FUTURE_LEEWAY_S = 30
const BEARER = /^bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/i
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/**
 * Whether the token ends as base64url writes it: the last character's padding bits clear. The
 * decoder ignores them, so otherwise other strings would pass for the same signature (one
 * token, several spellings; CONTRACT §6 accepts only the compact form).
 */
function canonicalEnd (token: string): boolean {
  const tail = token.length - token.lastIndexOf('.') - 1
  if (tail % 4 === 0) return true
  // One character over a whole group holds only 6 of a byte's 8 bits: not base64url at all.
  if (tail % 4 === 1) return false
  const padding = tail % 4 === 2 ? 0b1111 : 0b11
  return (BASE64URL.indexOf(token[token.length - 1]) & padding) === 0
}

/** The claims fast-jwt does not type-check, and the 30 s allowed for clock skew on iat and nbf. */
function validClaims (claims: TokenClaims): boolean {
  const latest = Date.now() / 1000 + FUTURE_LEEWAY_S
  const notInFuture = (value: unknown) => typeof value === 'number' && value <= latest
  return typeof claims.sub === 'string' && claims.sub !== '' && ROLES.includes(claims.role) &&
    Number.isSafeInteger(claims.uid) && claims.uid >= 1 && claims.uid <= MAX_USER_ID &&
    typeof claims.jti === 'string' && claims.jti !== '' &&
    notInFuture(claims.iat) && (claims.nbf === undefined || notInFuture(claims.nbf))
}

/**
 * Token checking for every route that does not opt out with `config.public`, then the
 * route's `config.role`. The role comes from the token only (SPEC rule 3).
 * @see https://github.com/fastify/fastify-jwt
 */
export default fp<{ jwt: Config['jwt'] }>(async function authPlugin (app, { jwt: settings }) {
  // @fastify/jwt signs (app.jwt.sign); requests are checked by the verifier, previous keys included.
  await app.register(jwt, jwtOptions(settings))
  const verifyToken = createTokenVerifier(settings)
  app.decorateRequest('account', null)
  app.decorate('jwks', jwkSet(settings))

  async function authenticate (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    try {
      await checkToken(request)
    } catch (error) {
      const reason = error instanceof TokenMissingError ? 'token_missing' : error instanceof TokenExpiredError ? 'token_expired' : error instanceof TokenInvalidError ? 'token_invalid' : undefined
      // Only token failures challenge the client (and are authz_fail); a database outage stays a plain 503.
      if (reason) {
        reply.header('www-authenticate', reason === 'token_missing' ? 'Bearer' : 'Bearer error="invalid_token"')
        requestSecurityEvent(request, 'authz_fail', { statusCode: 401, reason })
      }
      throw error
    }
  }

  async function checkToken (request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization
    if (header === undefined) throw new TokenMissingError()
    // Checked first, so no parsing or hashing is spent on an oversized header.
    if (header.length > MAX_AUTHORIZATION_BYTES) throw new TokenInvalidError()
    // Another scheme (Basic, a bare token) or a bare "Bearer" carries no bearer token
    // (RFC 6750 §3: the challenge then has no error code).
    if (!/^bearer\s+\S/i.test(header)) throw new TokenMissingError()
    // Exactly one space and the three compact segments, as Spring's resolver demands.
    const token = BEARER.exec(header)?.[1]
    if (token === undefined || !canonicalEnd(token)) throw new TokenInvalidError()
    let claims: TokenClaims
    try {
      claims = verifyToken(token) as unknown as TokenClaims
    } catch (error) {
      throw isExpiredTokenError(error) ? new TokenExpiredError() : new TokenInvalidError()
    }
    if (!validClaims(claims)) throw new TokenInvalidError()
    request.user = claims
    // A deleted user's token dies with the user: one primary-key look-up. `sub` must be the
    // username of that account (CONTRACT §6: a wrong claim is refused).
    request.account = (await app.usersRepository.findById(claims.uid)) ?? null
    if (!request.account || request.account.username !== claims.sub) throw new TokenInvalidError()
  }

  app.addHook('onRequest', async (request, reply) => {
    const { public: isPublic, role } = request.routeOptions.config
    if (isPublic) return
    await authenticate(request, reply)
    if (role && request.user.role !== role) {
      requestSecurityEvent(request, 'authz_fail', { statusCode: 403, reason: 'role', userId: request.user.uid })
      throw new ForbiddenError()
    }
  })
}, { fastify: '5.x', name: 'auth', dependencies: ['users'] })
