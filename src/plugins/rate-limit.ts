import fp from 'fastify-plugin'
import rateLimit, { type RateLimitPluginOptions as FastifyRateLimitOptions } from '@fastify/rate-limit'
import type { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import { TooManyAttemptsError } from '../errors.js'
import { requestSecurityEvent } from '../security-events.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The Redis that holds the §9 counters of every instance; null without REDIS_URL or with RATE_LIMITS=off. */
    limitsRedis: Redis | null
    /** Prefix of every key this service writes to that Redis. */
    limitsKeyPrefix: string
  }
}

/** CONTRACT §9: sign-ups per client address. Routes opt in with `config: { rateLimit: SIGNUP_RATE_LIMIT }`. */
export const SIGNUP_RATE_LIMIT = { max: 20, timeWindow: 60_000 } as const

export interface AbuseLimitOptions {
  readonly config: Config
  /** Keys in Redis start with this; tests give each case its own. */
  readonly keyPrefix?: string
}

const MINUTE = 60_000

/** A warning that says itself at most once a minute, however often its cause repeats. */
export function throttledWarning (log: FastifyBaseLogger, message: string, intervalMs = MINUTE) {
  let last = -Infinity
  return (details: object = {}): void => {
    const now = Date.now()
    if (now - last < intervalMs) return
    last = now
    log.warn(details, message)
  }
}

/**
 * Small timeouts and no offline queue: a Redis that is down or slow must turn into an error
 * within a fraction of a second, so the limiters can fall back instead of holding logins.
 */
export async function connectLimitsRedis (url: string, log: FastifyBaseLogger): Promise<Redis> {
  const warn = throttledWarning(log, 'Redis for the abuse limits is unavailable; counting in this instance until it is back')
  // Loaded only when REDIS_URL is set: ioredis adds about 10 MB to the idle RSS (BENCHMARKS.md).
  const { Redis } = await import('ioredis')
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 500,
    commandTimeout: 250,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(times * 200, 2000)
  })
  // Without a listener ioredis prints every failed reconnection to stderr.
  redis.on('error', (error) => warn({ err: error }))
  try {
    await redis.connect()
  } catch (error) {
    // ioredis keeps reconnecting in the background; the service starts anyway.
    warn({ err: error })
  }
  return redis
}

/**
 * The sign-up limit (@fastify/rate-limit, per address, IPv6 per /64), the Redis connection
 * shared with the login limiter, and the warning about X-Forwarded-For without TRUST_PROXY.
 * @see https://github.com/fastify/fastify-rate-limit
 */
export default fp<AbuseLimitOptions>(async function rateLimitPlugin (app, { config, keyPrefix = 'ums:' }) {
  const redis = config.rateLimits && config.redisUrl ? await connectLimitsRedis(config.redisUrl, app.log) : null
  app.decorate('limitsRedis', redis)
  app.decorate('limitsKeyPrefix', keyPrefix)
  if (redis) app.addHook('onClose', async () => { await redis.quit().catch(() => redis.disconnect()) })
  if (!config.rateLimits) return

  if (config.trustProxy === false) {
    const warn = throttledWarning(app.log, 'X-Forwarded-For received while TRUST_PROXY is off: every client behind that proxy shares one set of abuse counters')
    app.addHook('onRequest', async (request) => {
      if (request.headers['x-forwarded-for'] !== undefined) warn({ clientAddress: request.ip })
    })
  }

  const options: FastifyRateLimitOptions = {
    global: false,
    nameSpace: `${keyPrefix}signup:`,
    // Redis down must not turn sign-ups into 500s: the request goes through unlimited.
    skipOnError: true,
    // The errors plugin shapes UMS_ errors as { statusCode, error, message } with our Spanish text.
    errorResponseBuilder: () => new TooManyAttemptsError(),
    onExceeded: (request) => requestSecurityEvent(request, 'excess_rate_limit_exceeded', { reason: 'signup' })
  }
  await app.register(rateLimit, redis ? { ...options, redis } : options)
}, { fastify: '5.x', name: 'rate-limit' })
