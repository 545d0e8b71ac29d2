import type { Counter, Outcome } from './attempt-stores.js'
import { IN_FLIGHT_MS } from './policy.js'
import type { WriteBack } from './write-back.js'

/** Redis no longer held the attempt when its outcome arrived: the outcome changed nothing there. */
export class UnheardAttemptError extends Error {
  constructor () {
    super('Redis no longer holds the attempt: its outcome is written back instead')
    this.name = 'UnheardAttemptError'
  }
}

interface Unanswered { readonly send: () => Promise<void>, readonly counters: readonly Counter[], readonly outcome: Outcome, readonly takenAt: number }

/**
 * Outcomes sent to Redis whose answer never came. A paused Redis ran them or will; over a network
 * that dropped them (a black hole: the socket times out and goes) Redis never did, and its
 * failures would count nowhere while the attempts held their counters in flight for a minute.
 * Each is sent again, as it was, before counting is shared again: Redis applies an outcome only
 * while it holds its attempt (the finish script), so one that ran already changes nothing. One
 * that Redis no longer holds after IN_FLIGHT_MS may have expired unapplied: it is written back,
 * counting twice at worst, never nowhere (docs/decisions.md).
 */
export function createUnansweredFinishes (writeBack: WriteBack, { max = 100_000, now = Date.now } = {}) {
  const unanswered: Unanswered[] = []
  return {
    add (entry: Unanswered): void {
      if (unanswered.length < max) unanswered.push(entry)
      else writeBack.record(entry.counters, entry.outcome)
    },
    /** How many wait to be sent again. */
    pending: (): number => unanswered.length,
    /** Sends each again, oldest first; stops at the first that fails, to go on at the next catch-up. */
    async resend (): Promise<void> {
      while (unanswered.length > 0) {
        const next = unanswered[0]
        try {
          await next.send()
        } catch (error) {
          if (!(error instanceof UnheardAttemptError)) throw error
          if (now() - next.takenAt >= IN_FLIGHT_MS) writeBack.record(next.counters, next.outcome)
        }
        unanswered.shift()
      }
    }
  }
}
