import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t from 'tap'
import metricsPlugin from '../../src/plugins/metrics.js'

// The plugin alone, on a bare instance with a stand-in for the db plugin it depends on.
t.test('each answer is counted by route pattern and status; the pool gauges read the database\'s stats', async (t) => {
  const app = Fastify()
  await app.register(fp(async (app) => {
    app.decorate('database', { poolStats: () => ({ max: 10, inFlight: 3, waiting: 1, acquireTimeouts: 2 }) } as never)
  }, { name: 'db' }))
  await app.register(metricsPlugin)
  app.get('/users/:id', async () => ({ ok: true }))
  t.teardown(() => app.close())
  t.equal((await app.inject('/users/42')).statusCode, 200)
  t.equal((await app.inject('/users/43')).statusCode, 200)
  t.equal((await app.inject('/nowhere?secret=x')).statusCode, 404)
  const text = await app.metrics.registry.metrics()
  t.match(text, /^http_requests_total\{method="GET",route="\/users\/:id",status_code="200"\} 2$/m, 'by the route\'s pattern, never its URL')
  t.match(text, /^http_requests_total\{method="GET",route="<unmatched>",status_code="404"\} 1$/m)
  t.notMatch(text, /users\/42|secret/)
  const pool = text.split('\n').filter((line) => line.startsWith('db_pool_'))
  t.strictSame(pool, ['db_pool_max_connections 10', 'db_pool_queries_in_flight 3', 'db_pool_queries_waiting 1', 'db_pool_acquire_timeouts_total 2'], 'each read from the pool\'s stats')
})

// Prometheus's naming rule, as `promtool check metrics` applies it: prom-client's default metrics
// had three gauges ending in _total, which failed that check on every instance.
t.test('only counters end in _total', async (t) => {
  const { createMetrics } = await import('../../src/telemetry/metrics.js')
  const metrics = await createMetrics().registry.getMetricsAsJSON()
  t.strictSame(metrics.filter(({ name, type }) => name.endsWith('_total') && String(type) !== 'counter').map(({ name }) => name), [])
  t.ok(metrics.some(({ name }) => name === 'nodejs_active_handles'), 'the by-type gauges stay')
})
