import { randomBytes } from 'node:crypto'
import argon2, { type HashOptions } from 'argon2'
import type { Argon2Cost } from '../config/argon2.js'
import { inSpan } from '../telemetry/spans.js'
import { createWorkQueue } from './work-queue.js'

const round = (ms: number): number => Math.round(ms * 100) / 100

export interface PasswordManagerOptions {
  readonly cost: Argon2Cost
  readonly concurrency: number
  /** Called with the seconds each hash or verify took (metrics). */
  readonly onTiming?: (operation: 'hash' | 'verify', seconds: number) => void
}

interface LoginCheck<T> {
  /** The account `find` returned, whether or not the password matched. */
  readonly account: T | undefined
  readonly valid: boolean
  /** The stored hash is weaker than the configured cost and should be replaced. */
  readonly needsRehash: boolean
}

export interface PasswordManager {
  hash (password: string): Promise<string>
  /**
   * Looks the account up with `find`, then verifies the password in a hashing slot. The look-up
   * stays outside the slot, so a database that does not answer never pins a slot (its own
   * deadline turns it into a 503). No account → the dummy hash is verified, in the same time.
   */
  checkLogin<T extends { passwordHash: string }> (password: string, find: () => Promise<T | undefined>): Promise<LoginCheck<T>>
}

const PHC_ARGON2ID_V19 = /^\$argon2id\$v=19\$([a-z]=\d+(?:,[a-z]=\d+)*)\$/

/**
 * True when a hash is not argon2id v19 or any of its costs is below the configured one.
 * argon2.needsRehash also flags stronger hashes, which would weaken them on login.
 */
export function weakerThan (storedHash: string, cost: Argon2Cost): boolean {
  const match = PHC_ARGON2ID_V19.exec(storedHash)
  if (!match) return true
  const params = Object.fromEntries(match[1].split(',').map((pair) => pair.split('=')))
  // A missing parameter compares as NaN, which is never "at least" the cost.
  return !(Number(params.m) >= cost.memoryCost && Number(params.t) >= cost.timeCost && Number(params.p) >= cost.parallelism)
}

/** argon2id at the configured cost: the one set of options every hash is made with. */
export function argon2Options (cost: Argon2Cost): HashOptions & { type: typeof argon2.argon2id } {
  return { type: argon2.argon2id, ...cost }
}

/**
 * A new stored hash of `password`. The salt is made here, synchronously: argon2's own comes from
 * the async randomBytes, one more trip through the thread pool for 16 bytes.
 */
export function hashWithSalt (options: HashOptions, password: string): Promise<string> {
  return argon2.hash(passwordBytes(password), { ...options, salt: randomBytes(16) })
}

const LONE_SURROGATE = /\p{Cs}/u
const LONE_SURROGATES = /\p{Cs}/gu

/**
 * What argon2 hashes of a password: its UTF-8. A JSON string may hold an unpaired surrogate
 * (`"\ud800"`), which UTF-8 has no bytes for: argon2's `Buffer.from` would write U+FFFD for each,
 * so `…\ud800`, `…\ud801` and `…\ufffd` would be one password. Such a code unit is written in
 * UTF-8's own three-byte pattern instead (WTF-8), and passwords are compared exactly as received
 * (CONTRACT §3). A well-formed password's bytes are unchanged, and so is every stored hash.
 */
export function passwordBytes (password: string): string | Buffer {
  if (!LONE_SURROGATE.test(password)) return password
  const bytes: number[] = []
  for (const char of password) {
    const unit = char.codePointAt(0)!
    if (unit >= 0xd800 && unit <= 0xdfff) bytes.push(0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f))
    else bytes.push(...Buffer.from(char))
  }
  return Buffer.from(bytes)
}

/**
 * A stored-hash string of the configured cost whose salt and digest are random bytes: verifying
 * any password against it costs one real argon2id run and never matches. Made without hashing,
 * so start-up neither waits for argon2 nor leaves its 19 MB block in the process.
 */
export function dummyHashOf (cost: Argon2Cost): string {
  const b64 = (bytes: number) => randomBytes(bytes).toString('base64').replace(/=+$/, '')
  return `$argon2id$v=19$m=${cost.memoryCost},p=${cost.parallelism},t=${cost.timeCost}$${b64(16)}$${b64(32)}`
}

/** Longest login password ever hashed: anything longer is refused before argon2 runs. */
const MAX_LOGIN_PASSWORD = 128

/**
 * argon2id with the configured cost, bounded by a work limiter. An unknown e-mail is checked
 * against a dummy hash of the same cost, so both failures take the same time.
 */
export function createPasswordManager ({ cost, concurrency, onTiming }: PasswordManagerOptions): PasswordManager {
  const options = argon2Options(cost)
  const limit = createWorkQueue({ concurrency, maxQueue: 64, maxWaitMs: 2000, name: 'argon2 queue' })
  // A hashing slot, then the work, timed for the metrics; in a span with both times when tracing.
  const inSlot = <T>(operation: 'hash' | 'verify', work: () => Promise<T>): Promise<T> => {
    const queued = performance.now()
    let started = false
    return inSpan(`argon2 ${operation}`, {}, (span) => limit(async () => {
      started = true
      const start = performance.now()
      try {
        return await work()
      } finally {
        const end = performance.now()
        onTiming?.(operation, (end - start) / 1000)
        span.setAttributes({ 'hash.queue_wait_ms': round(start - queued), 'hash.duration_ms': round(end - start) })
      }
    }).catch((error: unknown) => {
      // Refused a slot (503): how long it waited for one is the span's point.
      if (!started) span.setAttributes({ 'hash.queue_wait_ms': round(performance.now() - queued) })
      throw error
    }))
  }
  const hash = (password: string): Promise<string> => inSlot('hash', () => hashWithSalt(options, password))
  const dummyHash = dummyHashOf(cost)

  return {
    hash,
    async checkLogin (password, find) {
      // Counted in code points like every other length; the cap keeps huge inputs off argon2.
      if (password.length > MAX_LOGIN_PASSWORD && [...password].length > MAX_LOGIN_PASSWORD) {
        return { account: await find(), valid: false, needsRehash: false }
      }
      const account = await find()
      const bytes = passwordBytes(password)
      const verify = (stored: string, as: string | Buffer = bytes) => inSlot('verify', () => argon2.verify(stored, as))
      // A hash made before the cost was raised verifies faster than the dummy an unknown e-mail
      // meets: a verify at the configured cost runs beside it, so the answer takes as long as
      // either (CONTRACT §3: timing does not reveal which e-mails exist). Until the next login
      // re-hashes it; a hash stronger than the cost (the cost lowered) is not evened out.
      const weaker = account !== undefined && weakerThan(account.passwordHash, cost)
      let matches = weaker
        ? (await Promise.all([verify(account.passwordHash), verify(dummyHash)]))[0]
        : await verify(account?.passwordHash ?? dummyHash)
      // A password with an unpaired surrogate stored before passwordBytes was hashed with U+FFFD
      // in its place: checked so too (an unknown e-mail as well, for the same time), and re-hashed.
      const legacy = !matches && bytes !== password && await verify(account?.passwordHash ?? dummyHash, password.replace(LONE_SURROGATES, '\ufffd'))
      matches ||= legacy
      const valid = matches && account !== undefined
      return { account, valid, needsRehash: valid && (weaker || legacy) }
    }
  }
}
