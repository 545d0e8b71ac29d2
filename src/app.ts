import { randomUUID } from 'node:crypto'
import type { Server } from 'node:http'
import Fastify, { LogController, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import sensible from '@fastify/sensible'
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import type { Config } from './config.js'
import type { Database } from './db/client.js'
import dbPlugin from './plugins/db.js'
import usersPlugin from './plugins/users.js'
import authPlugin from './plugins/auth.js'
import errorsPlugin from './plugins/errors.js'
import rateLimitPlugin from './plugins/rate-limit.js'
import loginLimiterPlugin from './plugins/login-limiter.js'
import metricsPlugin, { type Metrics } from './plugins/metrics.js'
import { logRequest } from './logger.js'
import authRoutes from './routes/auth.js'
import usersRoutes from './routes/users.js'
import adminRoutes from './routes/admin.js'
import { docsOrigins, openApiOptions, sharedSchemas } from './schemas/openapi.js'
import { ajvOptions } from './validation.js'

export interface AppDependencies {
  /** An open, migrated database owned by the caller (tests); otherwise the app opens its own. */
  readonly database?: Database
  /** Insert the development accounts; defaults to true when the app opens a development database. */
  readonly seed?: boolean
  readonly logger?: FastifyServerOptions['logger']
  readonly onHashTiming?: (operation: 'hash' | 'verify', seconds: number) => void
  /** Prefix of the abuse-limit keys in Redis (tests give each case its own). */
  readonly limitsKeyPrefix?: string
  /** The registry the management listener serves; the app makes its own otherwise. */
  readonly metrics?: Metrics
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/

/** Builds the API instance: registers everything, never listens. */
export async function buildApp (config: Config, deps: AppDependencies = {}) {
  const app = Fastify({
    logger: deps.logger ?? false,
    // One line per request instead of Fastify's two, from logRequest below.
    logController: new LogController({ disableRequestLogging: true }),
    // A hop count is valid at run time (proxy-addr); Fastify's types only list the other forms.
    trustProxy: config.trustProxy as FastifyServerOptions['trustProxy'],
    bodyLimit: 16 * 1024,
    // Keys that could reach prototypes are dropped; the rest of the body is validated as usual.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
    requestTimeout: 10_000,
    // Longer than a balancer's usual 60 s idle timeout, so the balancer closes first.
    keepAliveTimeout: 65_000,
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id']
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID()
    },
    ajv: ajvOptions,
    return503OnClosing: true
  }).withTypeProvider<TypeBoxTypeProvider>()
  ;(app.server as Server).headersTimeout = 5_000

  // SPEC.md's own-info request is a JSON body on a GET: Fastify must parse it.
  app.addHttpMethod('GET', { hasBody: true, overrideExisting: true })
  // Every body is JSON; Fastify's built-in text/plain parser would let other types through (415).
  app.removeContentTypeParser('text/plain')

  // Ecosystem plugins.
  await app.register(sensible)
  // Bodies and answers referenced by $id from the routes: named components in the OpenAPI document.
  for (const schema of sharedSchemas) app.addSchema(schema)
  // No CORS headers unless origins are listed (CONTRACT §4), except that in development "Try it
  // out" on the docs page (the management listener, another origin) works out of the box.
  const origins = [...config.corsOrigins, ...(config.profile === 'development' ? docsOrigins(config) : [])]
  if (origins.length > 0) {
    await app.register(cors, { origin: origins, exposedHeaders: ['x-request-id', 'retry-after', 'www-authenticate'] })
  }
  await app.register(swagger, openApiOptions(config))

  // Our plugins: database, users, tokens, error shapes.
  const seed = deps.seed ?? (!deps.database && config.profile === 'development')
  await app.register(dbPlugin, { config, database: deps.database })
  await app.register(metricsPlugin, { metrics: deps.metrics })
  await app.register(usersPlugin, { config, seed, onHashTiming: deps.onHashTiming })
  await app.register(authPlugin, { jwt: config.jwt })
  await app.register(errorsPlugin)
  await app.register(rateLimitPlugin, { config, keyPrefix: deps.limitsKeyPrefix })
  await app.register(loginLimiterPlugin, { config })

  app.addHook('onResponse', logRequest)
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-content-type-options', 'nosniff')
    reply.header('cache-control', 'no-store')
    reply.header('x-request-id', request.id)
  })

  // Routes, one plugin per path prefix.
  await app.register(authRoutes, { prefix: '/auth' })
  await app.register(usersRoutes, { prefix: '/users' })
  await app.register(adminRoutes, { prefix: '/admin' })

  return app
}

export type App = Awaited<ReturnType<typeof buildApp>>
