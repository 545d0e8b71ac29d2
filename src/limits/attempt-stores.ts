import type { Redis } from 'ioredis'

export interface Counter { readonly key: string, readonly max: number }

/** The outcome of taking an attempt: allowed (counted), or refused with the wait in ms. */
export type Take = { readonly blocked: false } | { readonly blocked: true, readonly index: number, readonly retryAfterMs: number }

/**
 * Where failure counters live. `take` is atomic: when every counter is under its maximum it
 * counts the attempt on all of them at once; otherwise it changes nothing. Counting before
 * the password is checked means a burst of parallel guesses cannot slip past the limit.
 */
export interface AttemptStore {
  take (counters: readonly Counter[], windowMs: number): Promise<Take>
  /** A success: forget `clear`, and hand back the attempt counted on `refund`. */
  settle (clear: string, refund: readonly string[]): Promise<void>
}

interface Entry { count: number, expiresAt: number }

/**
 * Counters in this instance's memory, expiring with their window. Bounded: when full, expired
 * entries go first, then the oldest tenth, so a flood of new keys costs memory only up to the cap.
 */
export function createMemoryStore ({ maxEntries = 100_000, now = Date.now }: { maxEntries?: number, now?: () => number } = {}): AttemptStore {
  const entries = new Map<string, Entry>()
  const live = (key: string, at: number): Entry | undefined => {
    const entry = entries.get(key)
    if (entry && entry.expiresAt <= at) {
      entries.delete(key)
      return undefined
    }
    return entry
  }
  const makeRoom = (at: number): void => {
    for (const [key, entry] of entries) if (entry.expiresAt <= at) entries.delete(key)
    if (entries.size < maxEntries) return
    let drop = Math.ceil(maxEntries / 10)
    for (const key of entries.keys()) {
      if (drop-- <= 0) break
      entries.delete(key)
    }
  }
  return {
    async take (counters, windowMs) {
      const at = now()
      let index = -1
      let retryAfterMs = 0
      for (const [i, { key, max }] of counters.entries()) {
        const entry = live(key, at)
        if (entry && entry.count >= max && entry.expiresAt - at > retryAfterMs) {
          index = i
          retryAfterMs = entry.expiresAt - at
        }
      }
      if (index >= 0) return { blocked: true, index, retryAfterMs }
      for (const { key } of counters) {
        const entry = live(key, at)
        if (entry) {
          entry.count++
        } else {
          if (entries.size >= maxEntries) makeRoom(at)
          entries.set(key, { count: 1, expiresAt: at + windowMs })
        }
      }
      return { blocked: false }
    },
    async settle (clear, refund) {
      const at = now()
      entries.delete(clear)
      for (const key of refund) {
        const entry = live(key, at)
        if (entry && --entry.count <= 0) entries.delete(key)
      }
    }
  }
}

// The same semantics as the memory store, atomic on the Redis server.
const TAKE = `
local window = tonumber(ARGV[1])
local index, wait = 0, 0
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 1]) then
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then ttl = window; redis.call('PEXPIRE', key, window) end
    if ttl > wait then index, wait = i, ttl end
  end
end
if index > 0 then return {index, wait} end
for _, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, window) end
end
return {0, 0}
`
const SETTLE = `
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') > 1 then redis.call('DECR', KEYS[i]) else redis.call('DEL', KEYS[i]) end
end
return 0
`

interface LoginCommands {
  loginTake (numKeys: number, ...args: Array<string | number>): Promise<[number, number]>
  loginSettle (numKeys: number, ...keys: string[]): Promise<number>
}

/** Counters in Redis, shared by every instance; each operation is one Lua script, one round trip. */
export function createRedisStore (redis: Redis): AttemptStore {
  if (!('loginTake' in redis)) {
    redis.defineCommand('loginTake', { lua: TAKE })
    redis.defineCommand('loginSettle', { lua: SETTLE })
  }
  const commands = redis as unknown as LoginCommands
  return {
    async take (counters, windowMs) {
      const [index, wait] = await commands.loginTake(counters.length, ...counters.map((c) => c.key), windowMs, ...counters.map((c) => c.max))
      return index === 0 ? { blocked: false } : { blocked: true, index: index - 1, retryAfterMs: wait }
    },
    async settle (clear, refund) {
      await commands.loginSettle(1 + refund.length, clear, ...refund)
    }
  }
}

/**
 * Redis while it answers, this instance's memory while it does not: a Redis outage never
 * blocks a login, it only makes the counters local until Redis is back.
 */
export function createFallbackStore (primary: AttemptStore, fallback: AttemptStore, options: { isReady: () => boolean, onFallback: (error: unknown) => void }): AttemptStore {
  const attempt = async <T>(work: (store: AttemptStore) => Promise<T>): Promise<T> => {
    if (options.isReady()) {
      try {
        return await work(primary)
      } catch (error) {
        options.onFallback(error)
      }
    } else {
      options.onFallback(new Error('Redis is not connected'))
    }
    return work(fallback)
  }
  return {
    take: (counters, windowMs) => attempt((store) => store.take(counters, windowMs)),
    settle: (clear, refund) => attempt((store) => store.settle(clear, refund))
  }
}
