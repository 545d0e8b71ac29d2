import { setTimeout as sleep } from 'node:timers/promises'
import closeWithGrace from 'close-with-grace'
import { ConfigError, loadConfig, type Config } from './config/index.js'
import type { App } from './app.js'
import type { Database } from './db/database.js'
import type { ManagementApp } from './management/management-app.js'
import { describeFailure } from './telemetry/error-description.js'

/** Longest wait for in-flight requests once the listener stops accepting (CONTRACT §7). */
const DRAIN_IN_FLIGHT_MS = 10_000

function configOrExit (): Config {
  try {
    const config = loadConfig(process.env)
    // DATABASE_URL is production's: development serves from memory whatever it says. Started so
    // (an environment file copied from .env.example), an instance would take sign-ups, lose them
    // at its next restart, and let the seed accounts in with their published passwords.
    if (config.profile === 'development' && config.databaseUrl !== undefined) {
      throw new ConfigError('APP_PROFILE', 'is development (the default), which ignores DATABASE_URL and keeps accounts in memory, seed accounts included: set APP_PROFILE=production, or unset DATABASE_URL')
    }
    return config
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    // One line naming the variable; a stack trace would only hide it.
    process.stderr.write(`${error.message}\n`)
    process.exit(1)
  }
}

// Until the shutdown sequence below takes over, a stop signal ends the start where it is (a wait
// for the database, for another instance's migrations): nothing is served or half-written yet, and
// the exit stays the signal's own, but it is said, so a start that never finished is not a mystery.
// close-with-grace's signals that an operator sends.
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR2'] as const
function stoppedDuringStart (signal: NodeJS.Signals): void {
  process.stderr.write(`Stopped by ${signal} during start, before serving\n`)
  startWatched(false)
  process.kill(process.pid, signal)
}
function startWatched (watched: boolean): void {
  for (const signal of STOP_SIGNALS) {
    if (watched) process.once(signal, stoppedDuringStart)
    else process.removeListener(signal, stoppedDuringStart)
  }
}
startWatched(true)

const config = configOrExit()
// Loaded once the configuration holds: a bad one is refused before the app is even read.
const [{ buildApp }, { buildManagementApp }, { createMetrics }, { createLogger }, { logSecurityEvent }, { openDatabase }] = await Promise.all([
  import('./app.js'), import('./management/management-app.js'), import('./telemetry/metrics.js'), import('./telemetry/logger.js'), import('./telemetry/security-events.js'),
  import('./db/open-database.js')
])
const metrics = createMetrics()
const log = createLogger(config)
// OpenTelemetry only when an OTLP endpoint is set: otherwise not one of its modules is loaded.
const tracing = config.tracing === undefined
  ? undefined
  : await (await import('./telemetry/otel.js')).startTracing({ config: config.tracing, onDropped: metrics.countDroppedSpans, log })
let shuttingDown = false
let database: Database
let app: App
let management: ManagementApp | undefined
try {
  // Opened, and migrated, before the app: Fastify's 10 s plugin timeout must not cut short a wait
  // for another instance's migrations, nor migrations that take longer. Connecting is bounded.
  database = await openDatabase(config, { onMigrationWait: (message) => log.warn(`${message}: the start goes on then`) })
  app = await buildApp(config, { database, seed: config.profile === 'development', loggerInstance: log, metrics, onHashTiming: metrics.observeHashTiming, tracing })
  if (config.management.port !== null) {
    management = await buildManagementApp({ api: app, isShuttingDown: () => shuttingDown, logger: app.log.child({ listener: 'management' }) })
  }
} catch (error) {
  // The database is unreachable at start, a migration failed: nothing to drain yet. One line
  // that names the cause, without what a database message may quote (CONTRACT §7).
  process.stderr.write(`Startup failed: ${describeFailure(error)}\n`)
  process.exit(1)
}

// argon2 runs on libuv's thread pool: at or below HASH_CONCURRENCY (as set, the default stays
// below it), file and DNS work would wait behind hashes.
if (!(config.threadPoolSize > config.hashConcurrency)) {
  app.log.warn({ threadPool: config.threadPoolSize, hashConcurrency: config.hashConcurrency }, 'UV_THREADPOOL_SIZE should be above HASH_CONCURRENCY; set it in the start command')
}
// Taken in production, for load tests (CONTRACT §1), but never silently: a deployment left so has
// no guard against password guessing.
if (config.profile === 'production' && !config.rateLimits) {
  app.log.warn('RATE_LIMITS=off: the abuse limits of CONTRACT §9 are off; for load tests and benchmarks only')
}

// A stray rejected promise is a bug to fix, not a reason to drop every request in flight.
process.on('unhandledRejection', (reason) => app.log.error({ err: reason }, 'unhandled promise rejection'))

startWatched(false)
closeWithGrace({
  // The whole sequence below, with room to spare; past it close-with-grace exits 1.
  delay: config.shutdownDrainMs + DRAIN_IN_FLIGHT_MS + 5_000,
  logger: app.log,
  skip: ['unhandledRejection']
}, async ({ signal, err }) => {
  // Readiness answers 503 from now on, so the balancer stops sending new clients here...
  shuttingDown = true
  app.beginDrain()
  if (err) app.log.fatal({ err }, 'uncaught exception: draining, then exit 1')
  logSecurityEvent(app.log, 'sys_shutdown', { reason: err ? 'uncaught exception' : signal ?? 'exit', drainMs: config.shutdownDrainMs })
  // ...while the API keeps serving until the balancer has noticed.
  await sleep(config.shutdownDrainMs)
  // Stop accepting and let in-flight requests finish; cut whatever is still running after 10 s.
  const cut = setTimeout(() => app.server.closeAllConnections(), DRAIN_IN_FLIGHT_MS)
  await app.close()
  clearTimeout(cut)
  await management?.close()
  // After the last request and the last readiness probe.
  await database.close()
  // What spans are queued go out now, or are given up within 2 s if the collector does not answer.
  await tracing?.shutdown()
  app.log.info('shut down')
})

let listening = 'PORT'
try {
  await app.listen({ port: config.port, host: config.host })
  listening = 'MANAGEMENT_PORT'
  if (management) await management.listen({ port: config.management.port!, host: config.management.host })
  logSecurityEvent(app.log, 'sys_startup', { profile: config.profile, port: config.port, managementPort: config.management.port, database: app.database.driver })
} catch (error) {
  // One line, as every failed start (CONTRACT §7): the address taken or refused says enough.
  process.stderr.write(`Cannot listen on ${listening}: ${describeFailure(error)}\n`)
  process.exit(1)
}
