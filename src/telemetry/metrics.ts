import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { PoolStats } from '../db/database.js'

export interface Metrics {
  /** Its own registry, never prom-client's global one: two apps in one test process stay apart. */
  readonly registry: Registry
  /** For buildApp's `onHashTiming`: seconds each argon2 hash or verify took. */
  observeHashTiming (operation: 'hash' | 'verify', seconds: number): void
  /** Where the pool gauges read from; set once the database is open. */
  watchPool (stats: () => PoolStats): void
  /** An answer, and its time when known (a request the HTTP parser refused has none: counted only). */
  observeRequest (method: string, route: string, statusCode: number, seconds?: number): void
  /** Spans tracing gave up on (src/telemetry/span-export.ts). */
  countDroppedSpans (reason: 'queue_full' | 'export_failed', count: number): void
  /** With REDIS_URL: whether the abuse limits count in Redis (src/limits/shared-counting.ts). */
  watchLimitsRedis (isShared: () => boolean): void
  /** A login or sign-up limit decided on this instance's counters because Redis did not answer. */
  countLimitsFallback (limit: 'login' | 'signup'): void
}

/** The registry of CONTRACT §8: requests by route pattern and status, hash time, pool use, process. */
export function createMetrics (): Metrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  // Gauges named like counters, which `promtool check metrics` refuses (prometheus/client_js#283);
  // each is the sum of its by-type gauge (nodejs_active_handles, …), which stays.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(name)
  const labelNames = ['method', 'route', 'status_code'] as const
  const requests = new Counter({ name: 'http_requests_total', help: 'API requests answered, by route pattern and status code', labelNames, registers: [registry] })
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'API response time, by route pattern and status code',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry]
  })
  const hashing = new Histogram({
    name: 'password_hash_duration_seconds',
    help: 'Time of one argon2id hash or verify, queueing excluded',
    labelNames: ['operation'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry]
  })

  let pool: (() => PoolStats) | undefined
  const poolGauge = (name: string, help: string, read: (stats: PoolStats) => number) => new Gauge({
    name,
    help,
    registers: [registry],
    collect () { if (pool) this.set(read(pool())) }
  })
  poolGauge('db_pool_max_connections', 'Connections the database pool may open', (s) => s.max)
  poolGauge('db_pool_queries_in_flight', 'Queries on a connection or waiting for one', (s) => s.inFlight)
  poolGauge('db_pool_queries_waiting', 'Queries waiting for a free connection', (s) => s.waiting)
  // A counter read from the pool, so it is exposed as one (a gauge would hide resets).
  new Counter({
    name: 'db_pool_acquire_timeouts_total',
    help: 'Queries refused because no connection was free within the acquire timeout (1 s)',
    registers: [registry],
    collect () { if (pool) { this.reset(); this.inc(pool().acquireTimeouts) } }
  })

  const droppedSpans = new Counter({
    name: 'otel_spans_dropped_total',
    help: 'Trace spans not exported: the export queue was full, or the collector refused or did not answer',
    labelNames: ['reason'] as const,
    registers: [registry]
  })

  // Registered only with REDIS_URL: a 0 from an instance without Redis would read as an outage.
  let limitsShared: (() => boolean) | undefined
  const limitsFallbacks = new Counter({
    name: 'limits_redis_fallbacks_total',
    help: 'Login and sign-up limit decisions taken on this instance\'s counters, by limit: Redis did not answer, or what was counted here meanwhile was not yet written back',
    labelNames: ['limit'] as const,
    registers: [registry]
  })

  return {
    registry,
    watchLimitsRedis (isShared) {
      if (!limitsShared) {
        new Gauge({
          name: 'limits_redis_up',
          help: '1 while the abuse limits count in Redis, shared by every instance; 0 while they count on this instance\'s own counters',
          registers: [registry],
          collect () { this.set(limitsShared?.() ? 1 : 0) }
        })
      }
      limitsShared = isShared
    },
    countLimitsFallback: (limit) => limitsFallbacks.inc({ limit }),
    observeHashTiming: (operation, seconds) => hashing.observe({ operation }, seconds),
    watchPool: (stats) => { pool = stats },
    countDroppedSpans: (reason, count) => droppedSpans.inc({ reason }, count),
    // prom-client hashes and checks the labels on every inc and observe, through a `labels()`
    // child too: keeping children would add a lookup and save nothing.
    observeRequest (method, route, statusCode, seconds) {
      const labels = { method, route, status_code: String(statusCode) }
      requests.inc(labels)
      if (seconds !== undefined) duration.observe(labels, seconds)
    }
  }
}
