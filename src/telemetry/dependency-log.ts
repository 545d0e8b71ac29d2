import type { FastifyBaseLogger } from 'fastify'

const MINUTE_MS = 60_000
/** Outages whose start and end a dependency's log says in any minute; those beyond are counted. */
const OUTAGES_SAID_A_MINUTE = 2

/**
 * A warning that says itself at most once a minute, however often its cause repeats. `kind`
 * gives each distinct cause its own minute (a connection refused must not hide a password
 * Redis rejects); `reset` lets the next occurrence speak at once.
 */
export function throttledWarning (log: FastifyBaseLogger, message: string, intervalMs = MINUTE_MS, now = Date.now) {
  const last = new Map<string, number>()
  const warn = (details: object = {}, kind = ''): void => {
    const at = now()
    if (at - (last.get(kind) ?? -Infinity) < intervalMs) return
    // Kinds are error codes, a handful; the cap only guards against a cause that varies without end.
    if (last.size >= 32 && !last.has(kind)) last.clear()
    last.set(kind, at)
    log.warn(details, message)
  }
  return Object.assign(warn, { reset: () => last.clear() })
}

/**
 * A cause as the log tells causes apart: a system error by its code, Redis's own refusal by its
 * first word (NOAUTH, LOADING…), an HTTP status, else the error's class.
 */
export function errorKind (error: unknown): string {
  const { code, name, message } = (error ?? {}) as { code?: unknown, name?: unknown, message?: unknown }
  if (code !== undefined) return String(code)
  if (name === 'ReplyError' && typeof message === 'string') return message.split(' ', 1)[0]
  return String(name ?? '')
}

/**
 * A dependency's outages in the log: when each began (`down`, with its cause, and again once a
 * minute for each other cause while it lasts) and when it ended (`back`). A dependency that
 * fails every other call would write a pair a call: past OUTAGES_SAID_A_MINUTE in a minute,
 * outages are counted instead, and the next one said carries `outagesNotLogged`.
 */
export function dependencyWatch (log: FastifyBaseLogger, { down, back }: { down: string, back: string }, now = Date.now) {
  const failing = throttledWarning(log, down, MINUTE_MS, now)
  const saidAt: number[] = []
  let outage = false
  let said = false
  let unsaid = 0
  return {
    failed (error: unknown): void {
      if (!outage) [outage, said, unsaid] = [true, false, unsaid + 1]
      if (said) return failing({ err: error }, errorKind(error))
      const at = now()
      while (saidAt.length > 0 && at - saidAt[0] >= MINUTE_MS) saidAt.shift()
      // Said as soon as the minute has room: an outage that outlasts the flapping is not hidden.
      if (saidAt.length >= OUTAGES_SAID_A_MINUTE) return
      saidAt.push(at)
      said = true
      failing.reset()
      failing({ err: error, ...(unsaid > 1 ? { outagesNotLogged: unsaid - 1 } : {}) }, errorKind(error))
      unsaid = 0
    },
    answered (details: object = {}): void {
      if (outage && said) log.info(details, back)
      outage = false
    }
  }
}
