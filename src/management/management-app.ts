import Fastify, { LogController, type FastifyBaseLogger } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { App } from '../app.js'
import { migrationJournal } from '../db/migrate.js'
import { httpError } from '../http/error-bodies.js'
import { messages } from '../http/messages.js'
import { clientErrorHandler, rerouteFrameworkError } from '../http/refusals.js'
import { LISTENER_TIMEOUTS } from '../http/listener-timeouts.js'
import { describeFailure } from '../telemetry/error-description.js'
import { dependencyWatch, throttledWarning } from '../telemetry/dependency-log.js'

export interface ManagementOptions {
  /** The API instance: its listener, database, metrics and route schemas. */
  readonly api: App
  /** True from the moment shutdown begins: readiness answers 503 so the balancer drains us. */
  readonly isShuttingDown: () => boolean
  readonly logger?: FastifyBaseLogger
}

type State = 'up' | 'down'
interface Readiness { status: State, database: State, api?: 'down', migrations?: 'down' }

const CHECK_TIMEOUT_MS = 1000

/**
 * The management listener of CONTRACT §8: health, metrics, API docs and the tokens' public
 * keys on a port of its own, because SPEC rule 9 puts every other path of the API port
 * behind a token. It is never exposed on the balancer's public side, so it has no
 * authentication.
 */
export async function buildManagementApp ({ api, isShuttingDown, logger }: ManagementOptions) {
  // The OpenAPI document is complete only once every API route is registered.
  await api.ready()
  const head = migrationsHead()
  const app = Fastify({
    loggerInstance: logger,
    // Health checks every few seconds would drown the request log.
    logController: new LogController({ disableRequestLogging: true }),
    // The API's bounds on a client (CONTRACT §7): a slow or silent client is answered 408.
    requestTimeout: LISTENER_TIMEOUTS.requestTimeout,
    http: { headersTimeout: LISTENER_TIMEOUTS.headersTimeout, connectionsCheckingInterval: LISTENER_TIMEOUTS.connectionsCheckingInterval },
    // Closing ends every connection at once: Node stops timing out silent ones when its server
    // closes, and one idle probe's socket would hold the shutdown to close-with-grace's bound.
    // A health check cut here was going to be told 503 anyway.
    forceCloseConnections: true,
    // A URL that does not decode is an unknown path here too (the 404 below), not Fastify's 400 quoting it.
    frameworkErrors: rerouteFrameworkError,
    // What the HTTP parser refuses (400, 408, 431) in the contract's shape, as on the API.
    clientErrorHandler
  })

  // The API's own document (its route schemas), served here and browsable at /docs.
  await app.register(swagger, { mode: 'static', specification: { document: api.swagger() as never } })
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: {
      // Runs in the browser, whose fetch() refuses a GET body; the API takes an absent own-info
      // body as an empty one (CONTRACT §5), so "Try it out" on GET /users/me sends none.
      requestInterceptor: function (request: Record<string, any>) {
        if (/^(GET|HEAD)$/i.test(request.method)) {
          delete request.body
          delete request.headers['Content-Type']
        }
        return request
      }
    }
  })

  // The plugin sends its static/index.html to the page but serves that same stock file, an
  // empty Swagger UI, as static/'s index: sent to the page too.
  app.get('/docs/static/', { schema: { hide: true } }, (_request, reply) => reply.redirect('/docs/'))

  // Fastify's own 404 quotes the request's path; this one, like the API's, quotes nothing of it.
  app.setNotFoundHandler((_request, reply) => {
    reply.code(404).header('x-content-type-options', 'nosniff').send(httpError(404, messages.notFound))
  })

  // Liveness never touches the database: a database outage must not get the process restarted.
  app.get('/health/live', async () => ({ status: 'up' }))

  // A record that cannot be read (a role without SELECT on it, say) keeps the instance out of
  // the balancer: said once a minute for each cause, not at every probe.
  const cannotRead = throttledWarning(app.log, 'readiness: the database\'s record of its migrations cannot be read; not ready until it can')
  const unreadable = (error: unknown) => { cannotRead({ err: error }, describeFailure(error)); return false }
  const readable = (atHead: boolean) => { cannotRead.reset(); return atHead }

  // When an outage began and when it healed, as the balancer's probes see it, beside each
  // failed request's own line.
  const databaseWatch = dependencyWatch(app.log, {
    down: 'readiness: the database does not answer; not ready until it does',
    back: 'readiness: the database answers again'
  })

  app.get('/health/ready', async (_request, reply) => {
    const body: Readiness = { status: 'up', database: 'up' }
    if (isShuttingDown() || !api.server.listening) body.api = 'down'
    try {
      await api.database.ping(CHECK_TIMEOUT_MS)
      databaseWatch.answered()
    } catch (error) {
      body.database = 'down'
      databaseWatch.failed(error)
    }
    // A database that answers but lacks this release's schema must not get traffic either.
    if (body.database === 'up' && !await migrationsAtHead(api, head).then(readable, unreadable)) body.migrations = 'down'
    if (body.api || body.migrations || body.database === 'down') body.status = 'down'
    return reply.code(body.status === 'up' ? 200 : 503).send(body)
  })

  app.get('/metrics', async (_request, reply) => {
    const { registry } = api.metrics
    return reply.type(registry.contentType).send(await registry.metrics())
  })

  app.get('/openapi.json', async () => app.swagger())

  // The tokens' public keys, for the product's other services to verify them (RFC 7517);
  // an empty set with HS256. Verifiers cache it; a token with a kid they lack makes them
  // fetch it again (jose's createRemoteJWKSet does), so a new key needs no wait.
  app.get('/.well-known/jwks.json', async (_request, reply) => reply.header('cache-control', 'max-age=300').send(api.jwks))

  return app
}

export type ManagementApp = Awaited<ReturnType<typeof buildManagementApp>>

/** The number of migrations and the newest one's timestamp, from drizzle-kit's journal. */
function migrationsHead (): { count: number, when: number } {
  const entries = migrationJournal()
  return { count: entries.length, when: Math.max(0, ...entries.map((e) => e.when)) }
}

/**
 * Drizzle's migrator records each applied migration with the journal's `when`, and applies
 * whatever is newer than the latest record; so the database is at head when it holds at
 * least as many records as the journal has entries and its latest is no older than the
 * journal's newest (a newer release's migrations count as at head: operations.md).
 */
async function migrationsAtHead (api: App, head: { count: number, when: number }): Promise<boolean> {
  const state = await api.database.migrationState(CHECK_TIMEOUT_MS)
  return state.applied >= head.count && state.latest >= head.when
}
