import { IN_FLIGHT_MS } from './policy.js'

export interface Counter { readonly key: string, readonly max: number }

/** What a counted attempt turned out to be; only a failure counts as one. */
export type Outcome = 'failure' | 'success' | 'abandoned'

/** An attempt counted in flight on its counters until `finish` says what it was. */
export interface Attempt {
  /** failure: one more failure on every counter; success: the first counter starts afresh; abandoned: forgotten. */
  finish (outcome: Outcome): Promise<void>
}

/**
 * The decision on one attempt. `limiting` lists the counters (by index) that refused it.
 * locked: a counter holds `max` failures, for `retryAfterMs` more. busy: a counter's failures
 * and attempts in flight reach `max` together; those may yet succeed, so the answer is "later".
 */
export type Take =
  | { readonly status: 'counted', readonly attempt: Attempt }
  | { readonly status: 'locked', readonly index: number, readonly retryAfterMs: number, readonly limiting: readonly number[] }
  | { readonly status: 'busy', readonly limiting: readonly number[] }

/**
 * Where login counters live. `take` is atomic: it refuses (changing nothing), or counts the
 * attempt in flight on every counter. Counting before the password is checked means parallel
 * guesses cannot slip past a limit; counting only finished failures as failures means a flood
 * of right passwords, or of logins refused with 503, never locks an account.
 */
export interface AttemptStore {
  take (counters: readonly Counter[], windowMs: number): Promise<Take>
}

/** A memory store can also be told about a lock it did not count itself (the fall-back store's mirror). */
export interface MemoryAttemptStore extends AttemptStore {
  /** `key` holds `max` failures for `ms` more, whatever this instance counted. */
  hold (key: string, max: number, ms: number): void
  /** The failures `key` holds (counted here, or a lock held) and for how long; undefined once expired. */
  failures (key: string): { count: number, remainingMs: number } | undefined
  /** Every failure counter's key, live: keys added while iterating are visited too. */
  keys (): Iterable<string>
}

/** `max`: the limit of the counter it counts for, which ranks it for eviction. */
interface Entry { count: number, expiresAt: number, readonly max: number }

/** Eviction ranks an entry by the tenths of its limit it reached, 10 at the limit and above. */
const TENTHS = 10
const weightOf = (entry: Entry): number => Math.min(TENTHS, Math.floor(entry.count * TENTHS / entry.max))

/** Suffix of the in-flight count of a counter (same hash tag as the counter in Redis). */
export const IN_FLIGHT = ':inflight'

/**
 * Counters in this instance's memory, expiring with their window. Bounded: when full, expired
 * entries go first, then a tenth of the rest, those furthest from their limit first and the oldest
 * among equals. A flood of new keys costs memory only up to the cap, and evicts its own kind: a
 * lock took its limit of failures to make, and an attacker flooding to lift it would need more
 * locks than nine tenths of the cap.
 */
export function createMemoryStore ({ maxEntries = 100_000, now = Date.now }: { maxEntries?: number, now?: () => number } = {}): MemoryAttemptStore {
  const entries = new Map<string, Entry>()
  const count = (key: string, at: number): Entry | undefined => {
    const entry = entries.get(key)
    if (entry && entry.expiresAt <= at) {
      entries.delete(key)
      return undefined
    }
    return entry
  }
  const makeRoom = (at: number): void => {
    for (const [key, entry] of entries) if (entry.expiresAt <= at) entries.delete(key)
    let drop = entries.size < maxEntries ? 0 : Math.ceil(maxEntries / 10)
    if (drop === 0) return
    // One pass: the oldest `drop` keys of each weight, then the lightest weights' go.
    const byWeight: string[][] = Array.from({ length: TENTHS + 1 }, () => [])
    for (const [key, entry] of entries) {
      const keys = byWeight[weightOf(entry)]
      if (keys.length < drop) keys.push(key)
    }
    for (const keys of byWeight) {
      for (const key of keys) {
        if (drop-- <= 0) return
        entries.delete(key)
      }
    }
  }
  /** One more on `key`, a counter of limit `max`; a new entry lives `ttl`, and so does an existing one when `refresh`. */
  const add = (key: string, at: number, ttl: number, refresh: boolean, max: number): void => {
    const entry = count(key, at)
    if (entry) {
      entry.count++
      if (refresh) entry.expiresAt = at + ttl
      return
    }
    if (entries.size >= maxEntries) makeRoom(at)
    entries.set(key, { count: 1, expiresAt: at + ttl, max })
  }

  const finish = (counters: readonly Counter[], windowMs: number) => async (outcome: Outcome): Promise<void> => {
    const at = now()
    for (const { key, max } of counters) {
      const inFlight = count(key + IN_FLIGHT, at)
      if (inFlight && --inFlight.count <= 0) entries.delete(key + IN_FLIGHT)
      if (outcome === 'failure') add(key, at, windowMs, false, max)
    }
    if (outcome === 'success') entries.delete(counters[0].key)
  }

  return {
    async take (counters, windowMs) {
      const at = now()
      let locked: { index: number, retryAfterMs: number } | undefined
      const limiting: number[] = []
      for (const [i, { key, max }] of counters.entries()) {
        const failures = count(key, at)
        if (failures && failures.count >= max) {
          limiting.push(i)
          const retryAfterMs = failures.expiresAt - at
          if (!locked || retryAfterMs > locked.retryAfterMs) locked = { index: i, retryAfterMs }
        } else if ((failures?.count ?? 0) + (count(key + IN_FLIGHT, at)?.count ?? 0) >= max) {
          limiting.push(i)
        }
      }
      if (locked) return { status: 'locked', ...locked, limiting }
      if (limiting.length > 0) return { status: 'busy', limiting }
      for (const { key, max } of counters) add(key + IN_FLIGHT, at, IN_FLIGHT_MS, true, max)
      return { status: 'counted', attempt: { finish: finish(counters, windowMs) } }
    },
    hold (key, max, ms) {
      const at = now()
      const entry = count(key, at)
      if (entry && entry.count >= max && entry.expiresAt >= at + ms) return
      if (!entry && entries.size >= maxEntries) makeRoom(at)
      entries.set(key, { count: Math.max(max, entry?.count ?? 0), expiresAt: at + ms, max })
    },
    failures (key) {
      const at = now()
      const entry = count(key, at)
      return entry && { count: entry.count, remainingMs: entry.expiresAt - at }
    },
    * keys () {
      for (const key of entries.keys()) if (!key.endsWith(IN_FLIGHT)) yield key
    }
  }
}
