import createError from '@fastify/error'
import { messages } from './messages.js'

/** Domain errors, made once; the error handler turns each into the contract's body. */
export const InvalidCredentialsError = createError('UMS_INVALID_CREDENTIALS', messages.badCredentials, 401)
export const ServiceUnavailableError = createError('UMS_SERVICE_UNAVAILABLE', messages.unavailable, 503)
/**
 * A 503 of the service's own, with why for the log (error-description.ts logs `reason`; the client
 * sees the fixed message). `logged`: a security event of the request already says why, so the
 * error handler writes no second line for it (a flood would write both for every request).
 */
export const serviceUnavailable = (reason: string, { logged = false } = {}) => Object.assign(new ServiceUnavailableError(), { reason, logged })
export const TokenMissingError = createError('UMS_TOKEN_MISSING', messages.tokenMissing, 401)
export const TokenInvalidError = createError('UMS_TOKEN_INVALID', messages.tokenInvalid, 401)
export const TokenExpiredError = createError('UMS_TOKEN_EXPIRED', messages.tokenExpired, 401)
export const ForbiddenError = createError('UMS_FORBIDDEN', messages.forbidden, 403)
export const TooManyAttemptsError = createError('UMS_TOO_MANY_ATTEMPTS', messages.tooManyAttempts, 429)

export type UniqueField = 'email' | 'username'

/** A new account collides with existing ones on these fields; the error handler words the 409. */
export class DuplicateUserError extends Error {
  readonly statusCode = 409
  readonly code = 'UMS_DUPLICATE_USER'
  constructor (readonly fields: readonly UniqueField[]) {
    super(`duplicate user: ${fields.join(', ')}`)
  }
}
