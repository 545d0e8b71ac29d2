import type { Attempt, AttemptStore, Counter } from './attempt-stores.js'
import { LOGIN_LIMITS, LOGIN_WINDOW_MS, loginKey, type LoginLimit } from './policy.js'

export type LoginVerdict =
  | { readonly status: 'counted', readonly attempt: Attempt }
  | { readonly status: 'locked', readonly limit: LoginLimit, readonly retryAfterSeconds: number }
  | { readonly status: 'busy', readonly limit: LoginLimit }

const LIMITS = Object.keys(LOGIN_LIMITS) as LoginLimit[]
// The pair comes first: a success clears the first counter (attempt-stores.ts).
const EMAIL = LIMITS.indexOf('email')

/**
 * The three §9 counters of one login: (address, e-mail), e-mail, address. `address` is already
 * grouped (IPv6 per /64) and `emailKey` is the e-mail's HMAC, so no store holds an e-mail. The
 * keys of one decision are spread over three families (an address's, an e-mail's, a pair's):
 * only the hash tag they all share (`loginKey`) puts them in one Redis Cluster slot.
 */
export function createLoginLimiter (store: AttemptStore, { prefix = 'ums:', windowMs = LOGIN_WINDOW_MS } = {}) {
  const counters = (address: string, emailKey: string, familiar: boolean): Counter[] => {
    const keys: Record<LoginLimit, string> = {
      pair: loginKey(prefix, `pair:${address}|${emailKey}`),
      email: loginKey(prefix, `email:${emailKey}`),
      address: loginKey(prefix, `address:${address}`)
    }
    // A familiar address still adds to the e-mail's failures, but is never refused for them.
    return LIMITS.map((limit) => ({ key: keys[limit], max: familiar && limit === 'email' ? Number.MAX_SAFE_INTEGER : LOGIN_LIMITS[limit] }))
  }
  return {
    /**
     * Counts the attempt in flight unless a limit refuses it. When the per-e-mail limit alone
     * refuses, `isFamiliar` is asked (the smart lockout): a familiar address tries again
     * without that limit.
     */
    async begin (address: string, emailKey: string, isFamiliar: () => Promise<boolean>): Promise<LoginVerdict> {
      let taken = await store.take(counters(address, emailKey, false), windowMs)
      if (taken.status !== 'counted' && taken.limiting.length === 1 && taken.limiting[0] === EMAIL && await isFamiliar()) {
        taken = await store.take(counters(address, emailKey, true), windowMs)
      }
      if (taken.status === 'counted') return taken
      if (taken.status === 'busy') return { status: 'busy', limit: LIMITS[taken.limiting[0]] }
      return { status: 'locked', limit: LIMITS[taken.index], retryAfterSeconds: Math.max(1, Math.ceil(taken.retryAfterMs / 1000)) }
    }
  }
}
