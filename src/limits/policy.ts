import { normalizeIP } from '@fastify/rate-limit'

/** CONTRACT §9: failed logins allowed per window, for each of the three keys. */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000
export const LOGIN_LIMITS = { pair: 10, email: 50, address: 100 } as const
export type LoginLimit = keyof typeof LOGIN_LIMITS

/** CONTRACT §9: sign-ups per client address. */
export const SIGNUP_LIMIT = { max: 20, timeWindow: 60_000 } as const

/**
 * One client as the limits count it: IPv6 per /64, IPv4-mapped addresses as IPv4. A socket
 * closed before the request was read has no address: those share one counter.
 */
export function addressKey (ip: string | undefined): string {
  return ip ? normalizeIP(ip) : 'unknown'
}
