import fp from 'fastify-plugin'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/index.js'
import { TooManyAttemptsError, serviceUnavailable } from '../http/errors.js'
import { throttledWarning } from '../telemetry/dependency-log.js'
import { emailDigest, requestSecurityEvent } from '../telemetry/security-events.js'
import { createMemoryStore, type AttemptStore } from '../limits/attempt-stores.js'
import { createFamiliarAddresses } from '../limits/familiar-addresses.js'
import { createLoginLimiter } from '../limits/login-limiter.js'
import { addressKey, LOGIN_WINDOW_MS } from '../limits/policy.js'
import { createFallbackStore, createRedisStore } from '../limits/redis-attempt-store.js'
import { createWriteBack } from '../limits/write-back.js'

/** One login as the limiter sees it, counted in flight until the route says how it ended. */
export interface LoginAttempt {
  /** The e-mail's HMAC, for the security events of this login. */
  readonly emailHmac: string
  /** Wrong password or no such account: one more failure on each counter. */
  failed (): Promise<void>
  /** The right password: the (address, e-mail) counter starts afresh and the address becomes familiar. */
  succeeded (userId: number): Promise<void>
  /** Neither (503: hashing saturated, database down): CONTRACT §9 counts only failures. */
  abandoned (): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    loginLimiter: {
      /**
       * Counts the attempt in flight, or refuses it: 429 with Retry-After (and authn_login_lock)
       * when a §9 limit is reached, 503 while attempts in flight fill one.
       */
      begin (request: FastifyRequest, reply: FastifyReply, email: string): Promise<LoginAttempt>
    }
  }
}

const nothing = async () => {}

/**
 * CONTRACT §9's failed-login counters, called by the login route before any hashing.
 * Counters live in Redis when limits-redis connected one, in memory otherwise; familiar
 * addresses live in the database.
 */
export default fp<{ config: Config }>(async function loginLimitPlugin (app, { config }) {
  const digest = (email: string) => emailDigest(config.jwt.digestKey, email)
  if (!config.rateLimits) {
    app.decorate('loginLimiter', {
      async begin (_request: FastifyRequest, _reply: FastifyReply, email: string) {
        return { emailHmac: digest(email), failed: nothing, succeeded: nothing, abandoned: nothing }
      }
    })
    return
  }

  const memory = createMemoryStore()
  const redis = app.limitsRedis
  let store: AttemptStore = memory
  const counting = app.limitsCounting
  if (redis && counting) {
    const full = throttledWarning(app.log, 'login failures counted while Redis was away exceed what this instance keeps for the write-back; the newest will not reach Redis')
    const writeBack = createWriteBack(redis, memory, { prefix: app.limitsKeyPrefix, counting, windowMs: LOGIN_WINDOW_MS, onFull: () => full() })
    const fallback = createFallbackStore(createRedisStore(redis), memory, { counting, writeBack })
    counting.catchUpWith(fallback.catchUp)
    store = fallback
  }
  const limiter = createLoginLimiter(store, { prefix: app.limitsKeyPrefix })
  const familiar = createFamiliarAddresses(app.database.db)

  app.decorate('loginLimiter', {
    async begin (request: FastifyRequest, reply: FastifyReply, email: string): Promise<LoginAttempt> {
      const address = addressKey(request.ip)
      const emailHmac = digest(email)
      const verdict = await limiter.begin(address, emailHmac, () => familiar.isFamiliar(email, address))
      if (verdict.status === 'locked') {
        requestSecurityEvent(request, 'authn_login_lock', { emailHmac, reason: verdict.limit, retryAfter: verdict.retryAfterSeconds })
        reply.header('retry-after', String(verdict.retryAfterSeconds))
        throw new TooManyAttemptsError()
      }
      if (verdict.status === 'busy') {
        requestSecurityEvent(request, 'excess_rate_limit_exceeded', { emailHmac, reason: `login in flight: ${verdict.limit}` })
        throw serviceUnavailable(`login attempts in flight fill the ${verdict.limit} counter`, { logged: true })
      }
      const { attempt } = verdict
      return {
        emailHmac,
        failed: () => attempt.finish('failure'),
        abandoned: () => attempt.finish('abandoned'),
        async succeeded (userId) {
          await Promise.all([
            attempt.finish('success'),
            // A login is not failed for want of this row; the address is simply not familiar yet.
            familiar.remember(userId, email, address).catch((error) => request.log.warn({ err: error, userId }, 'familiar address not recorded'))
          ])
        }
      }
    }
  })
}, { fastify: '5.x', name: 'login-limit', dependencies: ['limits-redis', 'db'] })
