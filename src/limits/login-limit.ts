import fp from 'fastify-plugin'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import { TooManyAttemptsError } from '../domain-errors.js'
import { throttledWarning } from '../logger.js'
import { emailDigest, requestSecurityEvent } from '../security-events.js'
import { createFallbackStore, createMemoryStore, createRedisStore, type AttemptStore } from './attempt-stores.js'
import { createLoginLimiter } from './login-limiter.js'
import { addressKey } from './policy.js'

/** One login as the limiter sees it. */
export interface LoginAttempt {
  /** The e-mail's HMAC, for the security events of this login. */
  readonly emailHmac: string
  /** The password was right: clears the (address, e-mail) counter. */
  succeeded (): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    loginLimiter: {
      /** Counts the attempt, or answers 429 with Retry-After (and logs authn_login_lock) when a §9 limit is reached. */
      begin (request: FastifyRequest, reply: FastifyReply, email: string): Promise<LoginAttempt>
    }
  }
}

/**
 * CONTRACT §9's failed-login counters, called by the login route before any hashing.
 * Counters live in Redis when limits-redis connected one, in memory otherwise.
 */
export default fp<{ config: Config }>(async function loginLimitPlugin (app, { config }) {
  const digest = (email: string) => emailDigest(config.jwt.digestKey, email)
  if (!config.rateLimits) {
    app.decorate('loginLimiter', {
      async begin (_request: FastifyRequest, _reply: FastifyReply, email: string) {
        return { emailHmac: digest(email), succeeded: async () => {} }
      }
    })
    return
  }

  const memory = createMemoryStore()
  const redis = app.limitsRedis
  let store: AttemptStore = memory
  if (redis) {
    const warn = throttledWarning(app.log, 'login limiter falls back to this instance\'s counters: Redis did not answer')
    store = createFallbackStore(createRedisStore(redis), memory, { isReady: () => redis.status === 'ready', onFallback: (error) => warn({ err: error }) })
  }
  const limiter = createLoginLimiter(store, { prefix: `${app.limitsKeyPrefix}login:` })

  app.decorate('loginLimiter', {
    async begin (request: FastifyRequest, reply: FastifyReply, email: string): Promise<LoginAttempt> {
      const address = addressKey(request.ip)
      const emailHmac = digest(email)
      const verdict = await limiter.begin(address, emailHmac)
      if (verdict.blocked) {
        requestSecurityEvent(request, 'authn_login_lock', { emailHmac, reason: verdict.limit, retryAfter: verdict.retryAfterSeconds })
        reply.header('retry-after', String(verdict.retryAfterSeconds))
        throw new TooManyAttemptsError()
      }
      return { emailHmac, succeeded: () => limiter.succeeded(address, emailHmac) }
    }
  })
}, { fastify: '5.x', name: 'login-limit', dependencies: ['limits-redis'] })
