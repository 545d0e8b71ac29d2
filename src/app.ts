import { randomUUID } from 'node:crypto'
import { METHODS } from 'node:http'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import sensible from '@fastify/sensible'
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import type { Config } from './config/index.js'
import type { Database } from './db/database.js'
import type { Metrics } from './telemetry/metrics.js'
import type { Tracing } from './telemetry/otel.js'
import dbPlugin from './plugins/db.js'
import usersPlugin from './plugins/users.js'
import authPlugin from './plugins/auth.js'
import errorHandlerPlugin from './plugins/error-handler.js'
import httpEdgesPlugin from './plugins/http-edges.js'
import jsonBodyPlugin from './plugins/json-body.js'
import metricsPlugin from './plugins/metrics.js'
import responseDeadlinePlugin from './plugins/response-deadline.js'
import clientAddressPlugin from './plugins/client-address.js'
import limitsRedisPlugin from './plugins/limits-redis.js'
import signupLimitPlugin from './plugins/signup-limit.js'
import loginLimitPlugin from './plugins/login-limit.js'
import { clientErrorHandler, collectRoutePatterns, rerouteFrameworkError } from './http/refusals.js'
import { LISTENER_TIMEOUTS } from './http/listener-timeouts.js'
import { deferredChildLogger, requestLogHook } from './telemetry/request-log.js'
import authRoutes from './routes/auth.js'
import usersRoutes from './routes/users.js'
import adminRoutes from './routes/admin.js'
import { docsOrigins, openApiOptions } from './schemas/openapi.js'
import { userSchemas } from './schemas/users.js'
import { errorSchemas } from './http/error-responses.js'
import { REQUEST_ID_PATTERN } from './schemas/responses.js'
import { ajvOptions } from './http/validation.js'
import { ANSWER_HEADERS, corsOptions } from './http/headers.js'

export interface AppDependencies {
  /** An open, migrated database owned by the caller (server.ts, tests); otherwise the app opens its own. */
  readonly database?: Database
  /** Insert the development accounts; defaults to true when the app opens a development database. */
  readonly seed?: boolean
  readonly logger?: FastifyServerOptions['logger']
  /** A logger made before the app, in place of `logger`'s options (server.ts: the start logs through it first). */
  readonly loggerInstance?: FastifyBaseLogger
  readonly onHashTiming?: (operation: 'hash' | 'verify', seconds: number) => void
  /** Prefix of the abuse-limit keys in Redis (tests give each case its own). */
  readonly limitsKeyPrefix?: string
  /** The registry the management listener serves; the app makes its own otherwise. */
  readonly metrics?: Metrics
  /** The response deadline (CONTRACT §7: 10 s); tests of what it covers shorten it. */
  readonly responseDeadlineMs?: number
  /** OpenTelemetry, when tracing is on (server.ts starts it before the app). */
  readonly tracing?: Tracing
}

const REQUEST_ID = new RegExp(REQUEST_ID_PATTERN)

/** Builds the API instance: registers everything, never listens. */
export async function buildApp (config: Config, deps: AppDependencies = {}) {
  const app = Fastify({
    ...(deps.loggerInstance ? { loggerInstance: deps.loggerInstance } : { logger: deps.logger ?? false }),
    // One line per request instead of Fastify's two, from requestLogHook below.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: deferredChildLogger,
    // The balancers' addresses or true/false (src/config/trust-proxy.ts refuses hop counts); Fastify's types want a mutable array.
    trustProxy: config.trustProxy as FastifyServerOptions['trustProxy'],
    bodyLimit: 16 * 1024,
    // Keys that could reach prototypes are dropped; the rest of the body is validated as usual.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
    requestTimeout: LISTENER_TIMEOUTS.requestTimeout,
    // Longer than a balancer's usual 60 s idle timeout, so the balancer closes first.
    keepAliveTimeout: 65_000,
    // A missing Host is refused in the contract's shape by plugins/http-edges.ts, not with Node's
    // bare 400. A repeated header is joined rather than cut to its first line: two Authorization
    // headers make one credential no token matches (401), not the first one's caller, whatever a
    // proxy or firewall that reads the last one believed.
    http: { headersTimeout: LISTENER_TIMEOUTS.headersTimeout, connectionsCheckingInterval: LISTENER_TIMEOUTS.connectionsCheckingInterval, requireHostHeader: false, joinDuplicateHeaders: true },
    // Answers Fastify and Node give outside the request pipeline, in the contract's shape (src/http/refusals.ts).
    clientErrorHandler,
    frameworkErrors: rerouteFrameworkError,
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id']
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID()
    },
    ajv: ajvOptions,
    // Requests that arrive while closing get the contract's 503 from plugins/http-edges.ts instead.
    return503OnClosing: false
  }).withTypeProvider<TypeBoxTypeProvider>()
  // Before any route: the parser's refusals name the route of a request whose body was cut.
  collectRoutePatterns(app)
  // Before any hook or route, so that @fastify/otel wraps every one of them in a span.
  if (deps.tracing) await app.register(deps.tracing.plugin)

  // SPEC.md's own-info request is a JSON body on a GET: Fastify must parse it.
  app.addHttpMethod('GET', { hasBody: true, overrideExisting: true })
  // Fastify routes only the methods it knows: any other that Node parses (WebDAV's PROPFIND…) would
  // miss the /auth/* catch-all and meet the root 404's token check (CONTRACT §5). Known to Fastify
  // and bodyless, it reaches the catch-alls like the others; no route of ours answers it.
  for (const method of METHODS) if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method)
  // Every body is JSON; Fastify's built-in text/plain parser would let other types through (415).
  app.removeContentTypeParser('text/plain')
  // Strict UTF-8, and an empty body is an absent one.
  await app.register(jsonBodyPlugin)

  // Ecosystem plugins.
  await app.register(sensible)
  // Error shapes before any plugin that adds routes (@fastify/cors's OPTIONS one): a route keeps the
  // error handler set when it was added.
  await app.register(errorHandlerPlugin)
  // Bodies and answers referenced by $id from the routes: named components in the OpenAPI document.
  for (const schema of [...errorSchemas, ...userSchemas]) app.addSchema(schema)
  // No CORS headers unless origins are listed (CONTRACT §4), except that in development "Try it
  // out" on the docs page (the management listener, another origin) works out of the box.
  const origins = [...config.corsOrigins, ...(config.profile === 'development' ? docsOrigins(config) : [])]
  if (origins.length > 0) {
    await app.register(cors, corsOptions(origins))
  }
  await app.register(swagger, openApiOptions(config))

  // Our plugins: the backstop and the client's address, database, users, tokens, then the abuse
  // limits of CONTRACT §9.
  const seed = deps.seed ?? (!deps.database && config.profile === 'development')
  // First of ours: the 10 s backstop, whose onRequest hook must run before any hook that may
  // wait (the account look-up of auth), or a request stuck there would never reach it.
  await app.register(responseDeadlinePlugin, { deadlineMs: deps.responseDeadlineMs })
  // Every later hook, limit and security event reads the client address it settles.
  await app.register(clientAddressPlugin, { config })
  await app.register(dbPlugin, { config, database: deps.database })
  await app.register(metricsPlugin, { metrics: deps.metrics })
  await app.register(httpEdgesPlugin)
  await app.register(usersPlugin, { config, seed, onHashTiming: deps.onHashTiming })
  await app.register(authPlugin, { jwt: config.jwt })
  await app.register(limitsRedisPlugin, { config, keyPrefix: deps.limitsKeyPrefix })
  await app.register(signupLimitPlugin, { config })
  await app.register(loginLimitPlugin, { config })

  app.addHook('onResponse', requestLogHook(app.log, deps.tracing?.logFields))
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.headers(ANSWER_HEADERS)
    reply.header('x-request-id', request.id)
    done(null, payload)
  })

  // Routes, one plugin per path prefix.
  await app.register(authRoutes, { prefix: '/auth' })
  await app.register(usersRoutes, { prefix: '/users' })
  await app.register(adminRoutes, { prefix: '/admin' })

  return app
}

export type App = Awaited<ReturnType<typeof buildApp>>
