import fp from 'fastify-plugin'
import { createMetrics, type Metrics } from '../telemetry/metrics.js'
import { UNMATCHED_ROUTE } from '../http/request-path.js'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics
  }
}

/**
 * Counts every API response by route pattern and status and watches the database pool.
 * The registry is served by the management listener, never on the API port.
 * @see https://github.com/siimon/prom-client
 */
export default fp<{ metrics?: Metrics }>(async function metricsPlugin (app, options) {
  const metrics = options.metrics ?? createMetrics()
  metrics.watchPool(() => app.database.poolStats())
  app.decorate('metrics', metrics)
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest(request.method, request.routeOptions.url ?? UNMATCHED_ROUTE, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}, { fastify: '5.x', name: 'metrics', dependencies: ['db'] })
