import fp from 'fastify-plugin'
import type { Redis } from 'ioredis'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config/index.js'
import { createSharedCounting, type SharedCounting } from '../limits/shared-counting.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The Redis that holds the §9 counters of every instance; null without REDIS_URL or with RATE_LIMITS=off. */
    limitsRedis: Redis | null
    /** Prefix of every key this service writes to that Redis. */
    limitsKeyPrefix: string
    /** Whether the limits count in that Redis right now; null without it. */
    limitsCounting: SharedCounting | null
  }
}

export interface LimitsRedisOptions {
  readonly config: Config
  /** Keys in Redis start with this; tests give each case its own. */
  readonly keyPrefix?: string
}

/**
 * Small timeouts and no offline queue: a Redis that is down or slow must turn into an error
 * within a fraction of a second, so the limits can fall back instead of holding logins. A
 * connection that hears nothing for a second after a command is replaced (ioredis's
 * `socketTimeout`): a command timing out leaves its connection open, and one whose path went
 * silent (a balancer or NAT that lost its state) would otherwise stay in use for good.
 */
async function connectLimitsRedis (url: string, app: FastifyInstance) {
  // Loaded only when REDIS_URL is set, so an instance without Redis does not carry ioredis.
  const { Redis } = await import('ioredis')
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 500,
    commandTimeout: 250,
    socketTimeout: 1000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(times * 200, 2000)
  })
  // The metrics plugin is absent from the bare-instance tests of the limits.
  const metrics = app.hasDecorator('metrics') ? app.metrics : undefined
  const counting = createSharedCounting(redis, { log: app.log, onFallback: (limit) => metrics?.countLimitsFallback(limit) })
  metrics?.watchLimitsRedis(() => counting.isShared())
  try {
    await redis.connect()
  } catch {
    // ioredis keeps reconnecting in the background; the service starts anyway. Its `error` event
    // has said why: the rejection itself only says "Connection is closed."
    counting.lost()
  }
  return { redis, counting }
}

/**
 * The Redis connection the §9 limits share across instances, closed with the app.
 * @see https://github.com/redis/ioredis
 */
export default fp<LimitsRedisOptions>(async function limitsRedisPlugin (app, { config, keyPrefix = 'ums:' }) {
  const connected = config.rateLimits && config.redisUrl ? await connectLimitsRedis(config.redisUrl, app) : null
  app.decorate('limitsRedis', connected?.redis ?? null)
  app.decorate('limitsKeyPrefix', keyPrefix)
  app.decorate('limitsCounting', connected?.counting ?? null)
  if (!connected) return
  const { redis, counting } = connected
  // By onReady every limit has set what its catch-up writes back.
  app.addHook('onReady', async () => { await counting.start() })
  app.addHook('onClose', async () => {
    counting.close()
    await redis.quit().catch(() => redis.disconnect())
  })
}, { fastify: '5.x', name: 'limits-redis' })
