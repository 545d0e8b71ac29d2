import { and, eq, gt, lt, ne, sql } from 'drizzle-orm'
import type { AppDatabase } from '../db/database.js'
import { familiarAddresses, users } from '../db/schema.js'
import { normalizeEmail } from '../schemas/user-rules.js'
import { inStatementSpan } from '../telemetry/spans.js'
import { FAMILIAR_MS } from './policy.js'

export interface FamiliarAddresses {
  /** Whether the account of `email` logged in successfully from `address` within 30 days. */
  isFamiliar (email: string, address: string): Promise<boolean>
  /** A successful login of `userId` from `address`. */
  remember (userId: number, email: string, address: string): Promise<void>
}

export interface FamiliarOptions {
  /** Answers kept in memory, so a flood of refused logins does not turn into as many queries. */
  readonly cacheMs?: number
  readonly cacheSize?: number
  readonly now?: () => number
}

/**
 * CONTRACT §9's familiar addresses, in the database: every instance sees them, they survive a
 * Redis outage or restart, and they go with the account. Read only when the per-e-mail limit
 * alone refuses a login; written once an hour at most per (account, address), on success.
 */
export function createFamiliarAddresses (db: AppDatabase, { cacheMs = 60_000, cacheSize = 10_000, now = Date.now }: FamiliarOptions = {}): FamiliarAddresses {
  const since = sql`now() - ${sql.raw(`interval '${FAMILIAR_MS / 86_400_000} days'`)}`
  const lookup = db.select({ userId: familiarAddresses.userId }).from(familiarAddresses)
    .innerJoin(users, eq(users.id, familiarAddresses.userId))
    .where(and(eq(users.email, sql.placeholder('email')), eq(familiarAddresses.address, sql.placeholder('address')), gt(familiarAddresses.lastSeen, since)))
    .limit(1).prepare('familiar_lookup')
  // A row touched within the hour is left alone: logins do not each rewrite it.
  const touch = db.insert(familiarAddresses).values({ userId: sql.placeholder('userId'), address: sql.placeholder('address') })
    .onConflictDoUpdate({ target: [familiarAddresses.userId, familiarAddresses.address], set: { lastSeen: sql`now()` }, setWhere: sql`${familiarAddresses.lastSeen} < now() - interval '1 hour'` })
    .returning({ userId: familiarAddresses.userId }).prepare('familiar_touch')
  const prune = db.delete(familiarAddresses)
    .where(and(eq(familiarAddresses.userId, sql.placeholder('userId')), ne(familiarAddresses.address, sql.placeholder('address')), lt(familiarAddresses.lastSeen, since)))
    .prepare('familiar_prune')

  const cache = new Map<string, { familiar: boolean, until: number }>()
  const keep = (key: string, familiar: boolean): void => {
    cache.delete(key)
    // Insertion order is age: the oldest answer makes room.
    if (cache.size >= cacheSize) cache.delete(cache.keys().next().value!)
    cache.set(key, { familiar, until: now() + cacheMs })
  }

  return {
    async isFamiliar (email, address) {
      const key = `${normalizeEmail(email)}\n${address}`
      const cached = cache.get(key)
      if (cached && cached.until > now()) return cached.familiar
      const familiar = (await inStatementSpan('SELECT', 'familiar_lookup', () => lookup.execute({ email: normalizeEmail(email), address }))).length > 0
      keep(key, familiar)
      return familiar
    },
    async remember (userId, email, address) {
      keep(`${normalizeEmail(email)}\n${address}`, true)
      // Pruned when the row was written: at most hourly per account and address.
      const touched = await inStatementSpan('INSERT', 'familiar_touch', () => touch.execute({ userId, address }))
      if (touched.length > 0) await inStatementSpan('DELETE', 'familiar_prune', () => prune.execute({ userId, address }))
    }
  }
}
