import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { IN_FLIGHT, type AttemptStore, type Counter, type MemoryAttemptStore, type Outcome, type Take } from './attempt-stores.js'
import type { SharedCounting } from './shared-counting.js'
import type { WriteBack } from './write-back.js'
import { IN_FLIGHT_MS } from './policy.js'
import { inRedisSpan } from '../telemetry/spans.js'
import { UnheardAttemptError, createUnansweredFinishes } from './unanswered-finishes.js'

// The memory store's semantics, atomic on the Redis server. KEYS: each counter's failures key,
// then its in-flight key. The caller gives every key one hash tag, so a Redis Cluster runs it.
// Attempts in flight are a sorted set of ids scored by when they stop counting: one whose finish
// never arrives (its instance died) drops out after IN_FLIGHT_MS however busy the counter stays.
const TAKE = `
local window, hold, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local result = {0, 0, 0}
for i = 1, #KEYS / 2 do
  local max = tonumber(ARGV[i + 3])
  local failures = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  redis.call('ZREMRANGEBYSCORE', KEYS[2 * i], '-inf', now)
  if failures >= max then
    local ttl = redis.call('PTTL', KEYS[2 * i - 1])
    if ttl < 0 then ttl = window; redis.call('PEXPIRE', KEYS[2 * i - 1], window) end
    if result[1] ~= 1 or ttl > result[3] then result[1], result[2], result[3] = 1, i, ttl end
    table.insert(result, i)
  elseif failures + redis.call('ZCARD', KEYS[2 * i]) >= max then
    if result[1] == 0 then result[1] = 2 end
    table.insert(result, i)
  end
end
if result[1] == 0 then
  for i = 1, #KEYS / 2 do
    redis.call('ZADD', KEYS[2 * i], now + hold, id)
    redis.call('PEXPIRE', KEYS[2 * i], hold)
  end
end
return result
`
// An outcome counts only while its attempt is in flight (sent twice, it counts once); returns 1 if
// applied. Counters it starts end at one instant: of two locks begun together, the pair is reported.
const FINISH = `
local applied = 0
local time = redis.call('TIME')
local ends = time[1] * 1000 + math.floor(time[2] / 1000) + tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
  if redis.call('ZREM', KEYS[2 * i], ARGV[3]) == 1 then
    applied = 1
    if ARGV[2] == 'failure' and redis.call('INCR', KEYS[2 * i - 1]) == 1 then redis.call('PEXPIREAT', KEYS[2 * i - 1], ends) end
  end
end
if ARGV[2] == 'success' and applied == 1 then redis.call('DEL', KEYS[1]) end
return applied
`

interface LoginCommands {
  loginTake (numKeys: number, ...args: Array<string | number>): Promise<number[]>
  loginFinish (numKeys: number, ...args: Array<string | number>): Promise<number>
}

/** Counters in Redis, shared by every instance; each operation is one Lua script, one round trip. */
export function createRedisStore (redis: Redis): AttemptStore {
  if (!('loginTake' in redis)) {
    redis.defineCommand('loginTake', { lua: TAKE })
    redis.defineCommand('loginFinish', { lua: FINISH })
  }
  const commands = redis as unknown as LoginCommands
  return {
    async take (counters, windowMs) {
      const keys = counters.flatMap(({ key }) => [key, key + IN_FLIGHT])
      const id = randomUUID()
      let answer: number[]
      try {
        answer = await inRedisSpan('login_take', () => commands.loginTake(keys.length, ...keys, windowMs, IN_FLIGHT_MS, id, ...counters.map((c) => c.max)))
      } catch (error) {
        // A command that timed out may still run, once a stalled Redis reads its socket again,
        // and hold its pair for IN_FLIGHT_MS after the login was answered from this instance's
        // counters. Its end, without an outcome, follows it on the same connection: right after.
        commands.loginFinish(keys.length, ...keys, windowMs, 'abandoned' satisfies Outcome, id).catch(() => {})
        throw error
      }
      const [status, index, wait, ...limiting] = answer
      const refusing = limiting.map((i) => i - 1)
      if (status === 1) return { status: 'locked', index: index - 1, retryAfterMs: wait, limiting: refusing }
      if (status === 2) return { status: 'busy', limiting: refusing }
      const finish = async (outcome: Outcome) => {
        const applied = await inRedisSpan('login_finish', () => commands.loginFinish(keys.length, ...keys, windowMs, outcome, id))
        if (applied !== 1 && outcome !== 'abandoned') throw new UnheardAttemptError()
      }
      return { status: 'counted', attempt: { finish } }
    }
  }
}

/**
 * Redis while it answers, this instance's memory while it does not: a Redis outage never blocks
 * a login, and never lifts the limits either. The memory store keeps a mirror of what this
 * instance saw: its own attempts and their outcomes, and every lock Redis reported, so a pair
 * locked in Redis stays locked here when Redis stops answering. What Redis never heard of goes
 * to `writeBack`, for when it answers again.
 */
export function createFallbackStore (primary: AttemptStore, local: MemoryAttemptStore, options: { counting: SharedCounting, writeBack: WriteBack }): AttemptStore & { catchUp (): Promise<number> } {
  const { counting, writeBack } = options
  const unanswered = createUnansweredFinishes(writeBack)
  const alone = async (counters: readonly Counter[], windowMs: number): Promise<Take> => {
    const taken = await local.take(counters, windowMs)
    if (taken.status !== 'counted') return taken
    const finish = async (outcome: Outcome) => {
      await taken.attempt.finish(outcome)
      writeBack.record(counters, outcome)
    }
    return { status: 'counted', attempt: { finish } }
  }
  return {
    /** What must reach Redis before counting is shared: the outcomes never answered (those of the write-back's time too), the write-back. */
    async catchUp () {
      let written = 0
      do {
        await unanswered.resend()
        written += await writeBack.catchUp()
      } while (unanswered.pending() > 0)
      return written
    },
    async take (counters, windowMs) {
      if (!counting.isShared()) {
        counting.fellBack('login')
        return alone(counters, windowMs)
      }
      let taken: Take
      try {
        if (!counting.isConnected()) throw new Error('Redis is not connected')
        taken = await primary.take(counters, windowMs)
      } catch (error) {
        counting.fellBack('login', error)
        return alone(counters, windowMs)
      }
      if (taken.status === 'locked') local.hold(counters[taken.index].key, counters[taken.index].max, taken.retryAfterMs)
      if (taken.status !== 'counted') return taken
      const shared = taken.attempt
      const takenAt = Date.now()
      // Never refused: the mirror only counts, Redis decides.
      const mirror = await local.take(counters.map(({ key }) => ({ key, max: Infinity })), windowMs)
      const finish = async (outcome: Outcome) => {
        await Promise.all([finishShared(outcome), mirror.status === 'counted' ? mirror.attempt.finish(outcome) : undefined])
      }
      // An outcome that cannot be sent is written back later, as is one Redis no longer held the
      // attempt of (it lost its keys). One sent and not answered is sent again (src/limits/unanswered-finishes.ts).
      const finishShared = async (outcome: Outcome) => {
        if (!counting.isConnected()) return writeBack.record(counters, outcome)
        await shared.finish(outcome).catch((error: unknown) => {
          if (error instanceof UnheardAttemptError) return writeBack.record(counters, outcome)
          unanswered.add({ send: () => shared.finish(outcome), counters, outcome, takenAt })
          counting.lost(error)
        })
      }
      return { status: 'counted', attempt: { finish } }
    }
  }
}
