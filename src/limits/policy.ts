import { normalizeIP } from '@fastify/rate-limit'

/** CONTRACT §9: failed logins allowed per window, for each of the three keys. */
export const LOGIN_WINDOW_MS = 15 * 60 * 1000
export const LOGIN_LIMITS = { pair: 10, email: 50, address: 100 } as const
export type LoginLimit = keyof typeof LOGIN_LIMITS

/**
 * How long a login may stay counted as in flight without an outcome: far above the slowest
 * login (2 s waiting for a hashing slot, the hash, a 5 s statement timeout), and short enough
 * that the attempts of an instance that died mid-login stop holding their counters soon.
 */
export const IN_FLIGHT_MS = 60_000

/** CONTRACT §9: an address is familiar to an account for 30 days after a successful login from it. */
export const FAMILIAR_MS = 30 * 24 * 60 * 60 * 1000

/**
 * A Redis key of the login limits: every one shares the `{login}` hash tag, so that all of them
 * sit in one Redis Cluster slot, as a multi-key script requires.
 */
export const loginKey = (prefix: string, name: string): string => `${prefix}{login}:${name}`

/** CONTRACT §9: sign-ups per client address. */
export const SIGNUP_LIMIT = { max: 20, timeWindow: 60_000 } as const

/**
 * One client as the limits count it: IPv6 per /64, IPv4-mapped addresses as IPv4. A socket
 * closed before the request was read has no address: those share one counter.
 */
export function addressKey (ip: string | undefined): string {
  return ip ? normalizeIP(ip) : 'unknown'
}
