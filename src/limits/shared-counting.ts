import type { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import { throttledWarning } from '../telemetry/logger.js'

export type LimitName = 'login' | 'signup'

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
  /** The connection failed (ioredis's `error` event, a failed connect). */
  connectionFailed (error: unknown): void
  /** A decision of `limit` was taken on this instance's counters; `error` is Redis's when a call failed. */
  fellBack (limit: LimitName, error?: unknown): void
  /** Redis failed outside a decision (a write-back): count here until the catch-up succeeds. */
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
  // True once counting has left Redis: only then is its return worth an info line.
  let wasLost = false
  let step: () => Promise<number> = async () => 0
  let timer: NodeJS.Timeout | undefined
  // One throttle each: a failing write-back or a second outage must not be hidden behind the first's minute.
  const fallbackWarnings = {
    login: throttledWarning(log, 'login limiter falls back to this instance\'s counters: Redis is unavailable'),
    signup: throttledWarning(log, 'sign-up limit falls back to this instance\'s counters: Redis is unavailable')
  }
  const connectionWarning = throttledWarning(log, 'Redis for the abuse limits is unavailable; counting in this instance until it is back')
  const catchUpWarning = throttledWarning(log, 'Redis answers, but the counts of this instance could not be written back yet; counting here until they are')

  const isConnected = () => redis.status === 'ready'
  const retryLater = () => {
    if (timer || closed) return
    timer = setInterval(() => { void catchUp() }, retryMs).unref()
  }
  const lost = (error?: unknown) => {
    if (error !== undefined) connectionWarning({ err: error }, errorKind(error))
    wasLost = true
    if (shared) shared = false
    retryLater()
  }
  const catchUp = async () => {
    if (!started || closed || shared || catchingUp || !isConnected()) return
    catchingUp = true
    let written: number
    try {
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
    for (const warning of [...Object.values(fallbackWarnings), connectionWarning]) warning.reset()
    if (wasLost) log.info({ writtenBack: written }, 'Redis for the abuse limits answers again: counting is shared across instances again')
  }

  // Without a listener ioredis prints every failed reconnection to stderr.
  redis.on('error', (error) => connectionWarning({ err: error }, errorKind(error)))
  // A closed connection is a lost Redis even when no login noticed it; a ready one is worth a catch-up at once.
  redis.on('close', () => { if (!closed) lost() })
  redis.on('ready', () => { void catchUp() })

  return {
    isShared: () => shared,
    isConnected,
    connectionFailed: (error) => connectionWarning({ err: error }, errorKind(error)),
    fellBack (limit, error) {
      onFallback?.(limit)
      fallbackWarnings[limit](error === undefined ? {} : { err: error })
      if (error !== undefined || shared) lost()
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

/**
 * A refused connection, a timeout and a rejected password are different problems, each worth a
 * line: a system error by its code, Redis's own refusal by its first word (NOAUTH, LOADING…).
 */
function errorKind (error: unknown): string {
  const { code, name, message } = (error ?? {}) as { code?: unknown, name?: unknown, message?: unknown }
  if (code !== undefined) return String(code)
  if (name === 'ReplyError' && typeof message === 'string') return message.split(' ', 1)[0]
  return String(name ?? '')
}
