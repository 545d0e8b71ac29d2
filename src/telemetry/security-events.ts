import { createHmac } from 'node:crypto'
import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { normalizeEmail } from '../schemas/user-rules.js'

/** CONTRACT §7's security events, named after OWASP's logging vocabulary. */
export type SecurityEvent =
  | 'authn_login_success' | 'authn_login_fail' | 'authn_login_lock'
  | 'authz_fail' | 'input_validation_fail' | 'excess_rate_limit_exceeded'
  | 'user_created' | 'role_changed' | 'sys_startup' | 'sys_shutdown'

/** What an event may carry. Never a password, a token or an e-mail in clear. */
export interface SecurityEventDetails {
  readonly userId?: number
  /** An e-mail that matched no account, as `emailDigest` gives it. */
  readonly emailHmac?: string
  /** Why an authorization failed, which limit was hit. */
  readonly reason?: string
  /** Field names only: the values may be passwords typed in the wrong box. */
  readonly fields?: readonly string[]
  readonly [detail: string]: unknown
}

// OWASP's suggested levels: failures are warnings, the rest is information.
const WARNINGS: ReadonlySet<SecurityEvent> = new Set<SecurityEvent>([
  'authn_login_fail', 'authn_login_lock', 'authz_fail', 'input_validation_fail', 'excess_rate_limit_exceeded'
])

/**
 * An e-mail as the logs and the limiters know it: an HMAC keyed by `config.jwt.digestKey`, so a
 * log reader can tell that two attempts named the same address without learning which one.
 */
export function emailDigest (key: string, email: string): string {
  return createHmac('sha256', key).update(normalizeEmail(email)).digest('hex')
}

/**
 * One JSON line on `log`. The logger adds the time (ISO-8601 UTC in production, see logger.ts)
 * and, for a request's logger, the request id (`reqId`): repeating them here would write
 * each key twice on the same line.
 */
export function logSecurityEvent (log: FastifyBaseLogger, event: SecurityEvent, details: SecurityEventDetails = {}): void {
  const line = { event, ...details }
  if (WARNINGS.has(event)) log.warn(line, event)
  else log.info(line, event)
}

/** A security event of a request: its logger carries `reqId`; the client address is `TRUST_PROXY`'s. */
export function requestSecurityEvent (request: FastifyRequest, event: SecurityEvent, details: SecurityEventDetails = {}): void {
  logSecurityEvent(request.log, event, { clientAddress: request.ip, ...details })
}
