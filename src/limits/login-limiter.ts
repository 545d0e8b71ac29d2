import type { AttemptStore } from './attempt-stores.js'
import { LOGIN_LIMITS, LOGIN_WINDOW_MS, type LoginLimit } from './policy.js'

export type LoginVerdict = { readonly blocked: false } | { readonly blocked: true, readonly limit: LoginLimit, readonly retryAfterSeconds: number }

/**
 * The three §9 counters of one login: (address, e-mail), e-mail, address. `address` is already
 * grouped (IPv6 per /64) and `emailKey` is the e-mail's HMAC, so no store holds an e-mail.
 */
export function createLoginLimiter (store: AttemptStore, { prefix = 'ums:login:', windowMs = LOGIN_WINDOW_MS } = {}) {
  const limits = Object.keys(LOGIN_LIMITS) as LoginLimit[]
  const keys = (address: string, emailKey: string) => ({
    pair: `${prefix}pair:${address}|${emailKey}`,
    email: `${prefix}email:${emailKey}`,
    address: `${prefix}address:${address}`
  })
  return {
    /** Counts the attempt as a failure unless a limit is already reached; then refuses it. */
    async begin (address: string, emailKey: string): Promise<LoginVerdict> {
      const k = keys(address, emailKey)
      const result = await store.take(limits.map((limit) => ({ key: k[limit], max: LOGIN_LIMITS[limit] })), windowMs)
      if (!result.blocked) return result
      return { blocked: true, limit: limits[result.index], retryAfterSeconds: Math.max(1, Math.ceil(result.retryAfterMs / 1000)) }
    },
    /** The password was right: the pair starts afresh, and the attempt was not a failure after all. */
    async succeeded (address: string, emailKey: string): Promise<void> {
      const k = keys(address, emailKey)
      await store.settle(k.pair, [k.email, k.address])
    }
  }
}

export type LoginLimiter = ReturnType<typeof createLoginLimiter>
