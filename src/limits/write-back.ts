import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { Counter, MemoryAttemptStore, Outcome } from './attempt-stores.js'
import type { SharedCounting } from './shared-counting.js'
import { EPOCH, WRITE_BACK } from './write-back-scripts.js'
import { loginKey } from './policy.js'

interface WriteBackCommands {
  limitsEpoch (key: string, candidate: string): Promise<string>
  limitsWriteBack (numKeys: number, ...args: Array<string | number>): Promise<number>
}

interface Item { readonly key: string, readonly add: number, readonly expiresAt: number, readonly max: number, readonly clear: boolean }
interface Unheard { count: number, expiresAt: number, max: number, clear: boolean }
interface Batch { readonly id: string, readonly epoch: string, readonly items: readonly Item[] }

export interface WriteBack {
  /**
   * An outcome Redis never heard of: of a login counted here while Redis did not answer, or whose
   * write could not be sent. A failure adds to every counter, a success clears the first.
   */
  record (counters: readonly Counter[], outcome: Outcome): void
  /** Writes back until nothing is left; the number of counters written. One run at a time. */
  catchUp (): Promise<number>
}

export interface WriteBackOptions {
  readonly prefix: string
  readonly counting: SharedCounting
  /** The counters' window: how long a recorded outcome counts, and how long a batch's marker lives. */
  readonly windowMs: number
  /** Counters per script: a big backlog goes in several round trips, one at a time, never in one long script. */
  readonly batchSize?: number
  readonly maxEntries?: number
  /** A failure or success not recorded: `maxEntries` counters already wait to be written. */
  readonly onFull?: () => void
  readonly now?: () => number
}

/**
 * Carries into Redis what this instance counted alone, once Redis answers again. If Redis kept
 * its keys, only the failures it never heard of are added. If it lost them, this instance adds
 * every failure it counted itself in the window and every lock it holds (its own, or one Redis
 * had reported to it): each instance adds its own share once, so the counts add up again, at
 * worst counting a failure twice, never losing one (docs/decisions.md, which also says why
 * sign-ups are not carried).
 */
export function createWriteBack (redis: Redis, local: MemoryAttemptStore, options: WriteBackOptions): WriteBack {
  const { prefix, counting, windowMs, batchSize = 500, maxEntries = 100_000, onFull, now = Date.now } = options
  if (!('limitsWriteBack' in redis)) {
    redis.defineCommand('limitsEpoch', { lua: EPOCH, numberOfKeys: 1 })
    redis.defineCommand('limitsWriteBack', { lua: WRITE_BACK })
  }
  const commands = redis as unknown as WriteBackCommands
  const epochKey = loginKey(prefix, 'epoch')
  const unheard = new Map<string, Unheard>()
  // The epoch whose Redis holds this instance's share; a pass over every local counter when Redis lost it.
  let known: string | undefined
  let pass: { epoch: string, keys: Iterator<string> } | undefined
  let unanswered: Batch | undefined
  let running: Promise<number> | undefined
  let flushTimer: NodeJS.Timeout | undefined

  const build = (epoch: string): Batch | undefined => {
    const at = now()
    const items: Item[] = []
    while (pass && items.length < batchSize) {
      const next = pass.keys.next()
      if (next.done) {
        known = pass.epoch
        pass = undefined
        break
      }
      // This instance's whole share of the counter, failures it never wrote included.
      unheard.delete(next.value)
      const held = local.failures(next.value)
      if (held) items.push({ key: next.value, add: held.count, expiresAt: at + held.remainingMs, max: -1, clear: false })
    }
    if (pass) return batch(epoch, items)
    for (const [key, entry] of unheard) {
      if (items.length >= batchSize) break
      unheard.delete(key)
      const held = local.failures(key)
      const expiresAt = held ? at + held.remainingMs : entry.expiresAt
      if (expiresAt > at || entry.clear) items.push({ key, add: entry.count, expiresAt: Math.max(expiresAt, at + 1), max: entry.max, clear: entry.clear })
    }
    return batch(epoch, items)
  }
  const batch = (epoch: string, items: Item[]): Batch | undefined => items.length > 0 ? { id: randomUUID(), epoch, items } : undefined

  const send = async ({ id, epoch, items }: Batch): Promise<number> => {
    const at = now()
    const live = items.filter((item) => item.expiresAt > at || item.clear)
    if (live.length === 0) return 0
    const keys = [epochKey, loginKey(prefix, `written:${id}`), ...live.map((item) => item.key)]
    const args = live.flatMap((item) => [item.add, Math.max(1, item.expiresAt - at), item.max, item.clear ? 1 : 0])
    return await commands.limitsWriteBack(keys.length, ...keys, epoch, windowMs, ...args)
  }

  const run = async (): Promise<number> => {
    let written = 0
    let epoch = await commands.limitsEpoch(epochKey, randomUUID())
    for (;;) {
      // Redis lost that batch along with everything else: the pass below carries it again.
      if (unanswered && unanswered.epoch !== epoch) unanswered = undefined
      if (!unanswered) {
        if (epoch !== known && pass?.epoch !== epoch) pass = { epoch, keys: local.keys()[Symbol.iterator]() }
        unanswered = build(epoch)
        if (!unanswered) return written
      }
      const applied = await send(unanswered)
      if (applied < 0) {
        unanswered = undefined
        epoch = await commands.limitsEpoch(epochKey, randomUUID())
        continue
      }
      written += unanswered.items.length
      unanswered = undefined
    }
  }
  const catchUp = () => {
    running ??= run().finally(() => { running = undefined })
    return running
  }

  return {
    record (counters, outcome) {
      if (outcome === 'abandoned') return
      const at = now()
      if (outcome === 'success') {
        // Failures before it are forgotten, here and, once written, in Redis.
        const { key, max } = counters[0]
        if (unheard.has(key) || unheard.size < maxEntries) unheard.set(key, { count: 0, expiresAt: at + windowMs, max, clear: true })
        else onFull?.()
      } else {
        for (const { key, max } of counters) {
          const entry = unheard.get(key)
          if (entry) {
            entry.count++
            entry.max = Math.min(entry.max, max)
          } else if (unheard.size < maxEntries) {
            unheard.set(key, { count: 1, expiresAt: at + windowMs, max, clear: false })
          } else {
            onFull?.()
          }
        }
      }
      // Written by the next catch-up while counting is not shared; in the background when it is,
      // never on the login's path.
      flushTimer ??= setTimeout(() => {
        flushTimer = undefined
        if (counting.isShared()) catchUp().catch((error) => counting.lost(error))
      }, 100).unref()
    },
    catchUp
  }
}
