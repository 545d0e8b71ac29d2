import { createRequire } from 'node:module'
import type { Redis } from 'ioredis'
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import { inRedisSpan, tracing } from '../telemetry/spans.js'
import type { SharedCounting } from './shared-counting.js'

type Store = FastifyRateLimitStore
type RouteOptions = Parameters<Store['child']>[0]

// @fastify/rate-limit's own two stores. Its package has no exports map, so they load by path;
// its types describe only the store interface, so their constructors are typed here.
const require = createRequire(import.meta.url)
const LocalStore: new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number) => Store = require('@fastify/rate-limit/store/LocalStore.js')
const RedisStore: new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key?: string) => Store = require('@fastify/rate-limit/store/RedisStore.js')

/**
 * Redis's count while the limits count there, this instance's own count when they do not: every
 * sign-up is also counted in the instance (the library's LocalStore), so a Redis that is down or
 * paused leaves the limit on the instance's counters, never on no limit at all (which is what
 * `skipOnError` would do). What was counted here alone is not written back to Redis: the window
 * is a minute (docs/decisions.md).
 */
class FallbackStore implements Store {
  constructor (
    private readonly shared: Store,
    private readonly own: Store,
    private readonly counting: SharedCounting
  ) {}

  incr (key: string, callback: Parameters<Store['incr']>[1], timeWindow: number, max: number): void {
    this.own.incr(key, (_error, mine) => {
      if (!this.counting.isShared() || !this.counting.isConnected()) {
        this.counting.fellBack('signup', this.counting.isShared() ? new Error('Redis is not connected') : undefined)
        return callback(null, mine)
      }
      const count = (done: Parameters<Store['incr']>[1]) => this.shared.incr(key, (error, result) => {
        if (error) this.counting.fellBack('signup', error)
        done(null, error ? mine : result)
      }, timeWindow, max)
      if (!tracing()) return count(callback)
      // Traced, the call becomes a promise for its span; the answer still comes by the callback.
      void inRedisSpan('signup_count', () => new Promise<void>((resolve) => count((error, result) => { callback(error, result); resolve() })))
    }, timeWindow, max)
  }

  child (routeOptions: RouteOptions): Store {
    return new FallbackStore(this.shared.child(routeOptions), this.own.child(routeOptions), this.counting)
  }
}

/** The `store` option of @fastify/rate-limit for the sign-up limit when REDIS_URL is set. */
export function signupStore (redis: Redis, nameSpace: string, counting: SharedCounting): FastifyRateLimitStoreCtor {
  return class extends FallbackStore {
    constructor () {
      super(new RedisStore(false, false, redis, nameSpace), new LocalStore(false, false), counting)
    }
  }
}
