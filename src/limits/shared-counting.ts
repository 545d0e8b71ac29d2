import type { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import { dependencyWatch, throttledWarning } from '../telemetry/dependency-log.js'

type LimitName = 'login' | 'signup'

/**
 * Whether the §9 limits count in Redis or on this instance's counters. Counting leaves Redis at
 * its first failure and comes back only once Redis answers and what this instance counted alone
 * meanwhile is written back (the catch-up): a decision taken in Redis before that would miss
 * those failures, and logins in between stay off the 250 ms timeout of a Redis that is gone.
 */
export interface SharedCounting {
  isShared (): boolean
  /** The connection can carry a command now (it may still go unanswered). */
  isConnected (): boolean
  /** A decision of `limit` was taken on this instance's counters; `error` is Redis's when a call failed. */
  fellBack (limit: LimitName, error?: unknown): void
  /** Redis failed outside a decision (a write-back, a failed connect): count here until the catch-up succeeds. */
  lost (error?: unknown): void
  /** What must reach Redis before counting is shared again; resolves once nothing is left. */
  catchUpWith (step: () => Promise<number>): void
  /** The first catch-up, once every limit has set its step (the app's onReady). */
  start (): Promise<void>
  close (): void
}

export interface SharedCountingOptions {
  readonly log: FastifyBaseLogger
  /** Each decision taken on this instance's counters (the fall-back metric). */
  readonly onFallback?: (limit: LimitName) => void
  /** How often a catch-up is tried while Redis is connected but counting is not shared. */
  readonly retryMs?: number
}

export function createSharedCounting (redis: Redis, { log, onFallback, retryMs = 1000 }: SharedCountingOptions): SharedCounting {
  let shared = false
  let started = false
  let closed = false
  let catchingUp = false
  let step: () => Promise<number> = async () => 0
  let timer: NodeJS.Timeout | undefined
  // Once a minute each, whatever the outages: which limits decided alone. The outages themselves
  // (start, cause, end) are the watch's.
  const fallbackWarnings = {
    login: throttledWarning(log, 'login limiter falls back to this instance\'s counters: Redis is unavailable'),
    signup: throttledWarning(log, 'sign-up limit falls back to this instance\'s counters: Redis is unavailable')
  }
  const redisWatch = dependencyWatch(log, {
    down: 'Redis for the abuse limits is unavailable; counting in this instance until it is back',
    back: 'Redis for the abuse limits answers again: counting is shared across instances again'
  })
  const catchUpWarning = throttledWarning(log, 'Redis answers, but the counts of this instance could not be written back yet; counting here until they are')

  const isConnected = () => redis.status === 'ready'
  const retryLater = () => {
    if (timer || closed) return
    timer = setInterval(() => { void catchUp() }, retryMs).unref()
  }
  const lost = (error?: unknown) => {
    if (error !== undefined) redisWatch.failed(error)
    if (shared) shared = false
    retryLater()
  }
  // Redis refusing REDIS_URL's database at connect (past its `databases`) is only an error event
  // to ioredis, which goes on in db 0: counting there would mix with what that database holds.
  const onItsDatabase = async (): Promise<boolean> => {
    const db = redis.options.db ?? 0
    if (db === 0) return true
    try {
      await redis.select(db)
      return true
    } catch (error) {
      lost(error)
      return false
    }
  }
  const catchUp = async () => {
    if (!started || closed || shared || catchingUp || !isConnected()) return
    catchingUp = true
    let written: number
    try {
      if (!await onItsDatabase()) return
      written = await step()
    } catch (error) {
      catchUpWarning({ err: error })
      return
    } finally {
      catchingUp = false
    }
    if (closed || !isConnected()) return
    shared = true
    clearInterval(timer)
    timer = undefined
    redisWatch.answered({ writtenBack: written })
  }

  // Without a listener ioredis prints every failed reconnection to stderr.
  redis.on('error', (error) => redisWatch.failed(error))
  // A closed connection is a lost Redis even when no login noticed it; a ready one is worth a catch-up at once.
  // A close is the cause only of an outage it begins: after a failed connect the error said why.
  redis.on('close', () => { if (!closed) lost(shared ? Object.assign(new Error('the connection to Redis closed'), { code: 'CONNECTION_CLOSED' }) : undefined) })
  redis.on('ready', () => { void catchUp() })

  return {
    isShared: () => shared,
    isConnected,
    fellBack (limit, error) {
      onFallback?.(limit)
      fallbackWarnings[limit](error === undefined ? {} : { err: error })
      if (error !== undefined || shared) lost(error)
    },
    lost,
    catchUpWith (next) { step = next },
    async start () {
      started = true
      if (isConnected()) await catchUp()
      if (!shared) lost()
    },
    close () {
      closed = true
      // A write-back queued in the background must not run on the connection being quit.
      shared = false
      clearInterval(timer)
    }
  }
}
