import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import * as schema from './schema.js'
import type { PublicUser } from './schema.js'
import { AcquireTimeoutError, StatementCancelledError, refusedInSession, sentByServer } from './pg-errors.js'
import { createTransactions } from './transactions.js'
import { withTimeout, type Database } from './database.js'
import { createArrivalQueue } from '../http/arrival-queue.js'
import { parseDatabaseUrl } from '../config/database-url.js'
import { ANSWER_DEADLINE_MS, CONNECT_TIMEOUT_MS, REQUEST_TIMEOUTS, STATEMENT_TIMEOUT_MS, acceptsStartupTimeouts, clientOptions } from './postgres-options.js'
import { MIGRATION_STATE_SQL, USERS_BY_IDS_SQL, userCopyPageSql } from './queries.js'
import { createConnector } from './connector.js'
import { assertDriverPatched, cancelRunning, copyOut, failWaiting, onConnection, type PendingQuery } from './postgres-internals.js'
import { createRefusalDrops } from './refusal-drops.js'

/** How often queries are checked for the acquire timeout: each fails within this much of it. */
const ACQUIRE_SWEEP_MS = 100

export interface PostgresOptions {
  readonly url: string
  readonly poolMax: number
  readonly applicationName?: string
  /** Longest wait for a connection before a query fails with UMS_DB_ACQUIRE_TIMEOUT (CONTRACT §7: 1 s). */
  readonly acquireTimeoutMs?: number
}

/** PostgreSQL through postgres.js, with the timeouts and deadlines of CONTRACT §7. */
export async function connectPostgres (options: PostgresOptions): Promise<Database> {
  assertDriverPatched()
  const target = parseDatabaseUrl(options.url)
  const connector = createConnector(target, { connectTimeoutMs: CONNECT_TIMEOUT_MS, answerDeadlineMs: ANSWER_DEADLINE_MS })
  const startupTimeouts = await acceptsStartupTimeouts(target, connector).catch((error: unknown) => { connector.stop(); throw error })
  const timeouts = startupTimeouts ? REQUEST_TIMEOUTS : undefined
  const client = postgres({
    ...clientOptions(target, connector, { applicationName: options.applicationName, timeouts }),
    max: options.poolMax,
    prepare: startupTimeouts,
    // No pipelining (documented, left out of the types): a query gets a connection of its own or
    // waits in the pool's queue, a state the acquire timeout below can see and bound.
    ...{ max_pipeline: 0 } as object,
    // postgres.js waits up to 20 s between connection attempts after repeated failures; a
    // database back after an outage would sit unused that long. At most 1 s here, with jitter.
    backoff: (retries: number) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: 60,
    max_lifetime: 30 * 60
  })
  // Health checks get a connection of their own: a probe that gives up destroys it, and never
  // holds one of the pool's (CONTRACT §7).
  const probeConnector = createConnector(target, { connectTimeoutMs: CONNECT_TIMEOUT_MS, answerDeadlineMs: ANSWER_DEADLINE_MS })
  const probe = postgres({ ...clientOptions(target, probeConnector, { applicationName: `${options.applicationName ?? 'user-management'}-probe`, timeouts }), max: 1, max_lifetime: 30 * 60 })
  async function probed<T> (query: PromiseLike<T>, timeoutMs: number): Promise<T> {
    try {
      return await withTimeout(query, timeoutMs)
    } catch (error) {
      // Past its bound, or broken; a server's answer (the migrations' table missing) leaves a
      // connection as good as it was, and destroying it would fail the next probe's connect.
      if (!refusedInSession(error)) probeConnector.destroyAll()
      throw error
    }
  }
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 1000
  // The queries in flight, oldest first, each with the time it was asked for (not a Map: see
  // src/http/arrival-queue.ts); behind a pooler, every statement of every transaction too.
  const inFlight = createArrivalQueue<PendingQuery>()
  const cancelled = new WeakSet<PendingQuery>()
  let acquireTimeouts = 0

  // postgres.js has no acquire timeout: a query waits in its queue for as long as the
  // database stays away. So a sweep looks at the queries asked for over acquireTimeoutMs ago;
  // one still not on a connection is taken out of the queue and fails with
  // UMS_DB_ACQUIRE_TIMEOUT (503). Once sent, statement_timeout bounds it on the server.
  const acquireSweep = setInterval(() => {
    inFlight.sweep(Date.now() - acquireTimeoutMs, (query) => {
      if (onConnection(query)) return 'keep'
      acquireTimeouts++
      // A connection opening for this query still joins the pool once open (patched postgres.js).
      failWaiting(query, new AcquireTimeoutError(acquireTimeoutMs, connector.recentFailure(acquireTimeoutMs)))
      return 'drop'
    })
    // A statement unanswered past statement_timeout waits where that bound does not reach (a
    // commit waiting for a synchronous standby that is gone). Cancelled before the answer
    // deadline destroys its socket, its backend stops waiting too, rather than for good: a
    // pooler that closes the server connection once that socket is gone does not end the wait.
    // The request fails either way (503); behind a pooler, the transaction's connection is closed.
    inFlight.sweep(Date.now() - STATEMENT_TIMEOUT_MS - ACQUIRE_SWEEP_MS * 3, (query) => {
      if (onConnection(query) && !cancelled.has(query)) {
        cancelled.add(query)
        // Whatever the server answers fails it; a lost connection keeps its own reason (NoAnswerError).
        cancelRunning(query, (rejection) => rejection === undefined || sentByServer(rejection) ? new StatementCancelledError(STATEMENT_TIMEOUT_MS, rejection) : rejection, connector.cancel)
      }
      return 'keep'
    })
  }, ACQUIRE_SWEEP_MS)
  acquireSweep.unref()

  // A server that refuses writes (a demoted primary) loses the connection, so the next finds the writable host.
  const refusals = createRefusalDrops(inFlight, connector)

  function tracked (query: PendingQuery): PendingQuery {
    const seq = inFlight.add(query, Date.now())
    const settle = () => { inFlight.remove(seq) }
    query.then(settle, settle)
    refusals.dropIfRefusing(query)
    return query
  }

  const transactions = createTransactions(client, connector, acquireTimeoutMs, tracked, () => { acquireTimeouts++ })
  const inTransaction = transactions.run

  /**
   * Drizzle's `client.unsafe(statement, params, options)`, optionally with `.values()`: the
   * pool's query, tracked for the acquire timeout; or, behind a pooler, the same in a
   * transaction of its own (a thenable Drizzle cannot tell from a query).
   */
  function unsafe (statement: string, params?: unknown[], queryOptions?: object) {
    if (startupTimeouts) return tracked(client.unsafe(statement, params as never[], queryOptions) as unknown as PendingQuery)
    return transactions.unsafe(statement, params, queryOptions)
  }

  // Drizzle calls `unsafe` for every statement; everything else (options, begin) is the client's own.
  const guarded = new Proxy(client, {
    get: (target, property) => property === 'unsafe' ? unsafe : Reflect.get(target, property, target)
  })
  const db = drizzle({ client: guarded, schema })

  return {
    db,
    driver: 'postgres',
    ping: async (timeoutMs = 1000) => { await probed(probe`select 1`, timeoutMs) },
    async migrationState (timeoutMs = 1000) {
      const [row] = await probed(probe.unsafe<Array<{ applied: number, latest: string }>>(MIGRATION_STATE_SQL), timeoutMs)
      return { applied: row.applied, latest: Number(row.latest) }
    },
    copyUserPage: (page, onText) => {
      const statement = userCopyPageSql(page, 'stdout')
      if (startupTimeouts) {
        const query = tracked(client.unsafe(statement) as unknown as PendingQuery)
        return refusals.copying(query, copyOut(query, onText))
      }
      return inTransaction((send) => copyOut(send(statement), onText))
    },
    usersByIds: async (ids) => await unsafe(USERS_BY_IDS_SQL, [ids as number[]], { prepare: true }) as PublicUser[],
    poolStats: () => {
      let queries = 0
      let waiting = 0
      inFlight.sweep(Infinity, (query) => {
        queries++
        if (!onConnection(query)) waiting++
        return 'keep'
      })
      return { max: options.poolMax, inFlight: queries, waiting, acquireTimeouts }
    },
    async close () {
      clearInterval(acquireSweep)
      connector.stop()
      probeConnector.stop()
      await Promise.all([client.end({ timeout: 5 }), probe.end({ timeout: 1 })])
    }
  }
}
