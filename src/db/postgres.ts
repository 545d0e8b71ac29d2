import { drizzle } from 'drizzle-orm/postgres-js'
import postgres, { type ReservedSql } from 'postgres'
import * as schema from './schema.js'
import { AcquireTimeoutError, DatabaseTimeoutError, refusedStartupParameter, refusesWrites } from './pg-errors.js'
import { withTimeout, type Database } from './database.js'
import type { UserRecord } from '../schemas/users.js'
import { createArrivalQueue } from '../arrival-queue.js'
import { describeHost, parseDatabaseUrl, type DatabaseTarget } from '../config/database-url.js'
import { MIGRATION_STATE_SQL, USERS_BY_IDS_SQL, userCopyPageSql } from './queries.js'
import { createConnector, type Connector } from './connector.js'
import { copyOut, failWaiting, onConnection, type PendingQuery } from './postgres-internals.js'

/** PostgreSQL's own bounds (CONTRACT §7). */
const STATEMENT_TIMEOUT_MS = 5000
const IDLE_IN_TRANSACTION_MS = 10_000
/** Past this, a socket awaiting an answer is on a dead path: a little above statement_timeout. */
const ANSWER_DEADLINE_MS = STATEMENT_TIMEOUT_MS + 1000
const CONNECT_TIMEOUT_MS = 1000
/** How often queries are checked for the acquire timeout: each fails within this much of it. */
const ACQUIRE_SWEEP_MS = 100
/** Where the server-side timeouts cannot come in the startup packet, they open every transaction. */
const BEGIN_WITH_TIMEOUTS = `begin; set local statement_timeout = ${STATEMENT_TIMEOUT_MS}; set local idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`

export interface PostgresOptions {
  readonly url: string
  readonly poolMax: number
  readonly applicationName?: string
  /** Longest wait for a connection before a query fails with UMS_DB_ACQUIRE_TIMEOUT (CONTRACT §7: 1 s). */
  readonly acquireTimeoutMs?: number
}

/**
 * postgres.js's options for a client of `target` whose sockets `connector` opens: it chooses
 * the host and negotiates TLS, so postgres.js is given no TLS. A standby is closed and the next host tried by postgres.js's `primary` check, also for
 * `read-write`, whose check in postgres.js lets a standby through (porsager/postgres#815); a
 * primary that refuses writes is left at its first refusal (`refusesWrites` below).
 */
export function clientOptions (target: DatabaseTarget, connector: Connector, { applicationName = 'user-management', startupTimeouts = false } = {}) {
  return {
    // postgres.js retries a closed standby only while its list has another host; it names them in errors.
    host: target.hosts.map(describeHost).join(','),
    ...(target.database ? { database: target.database } : {}),
    ...(target.user ? { user: target.user } : {}),
    pass: target.password,
    ssl: false,
    socket: connector.open,
    ...(target.targetSessionAttrs === 'any' ? {} : { target_session_attrs: 'primary' as const }),
    connect_timeout: CONNECT_TIMEOUT_MS / 1000,
    onnotice: () => {},
    connection: {
      application_name: target.applicationName ?? applicationName,
      ...(startupTimeouts ? { statement_timeout: STATEMENT_TIMEOUT_MS, idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS } : {})
    }
  }
}

/**
 * Whether the server takes the timeouts in the startup packet. A transaction pooler refuses
 * them (PgBouncer's stock `ignore_startup_parameters`): then every statement runs in a
 * transaction that sets them first, and nothing is prepared by name, which such a pooler
 * would lose between transactions.
 */
async function acceptsStartupTimeouts (target: DatabaseTarget, connector: Connector): Promise<boolean> {
  const sql = postgres({ ...clientOptions(target, connector, { startupTimeouts: true }), max: 1 })
  try {
    await sql`select 1`
    return true
  } catch (error) {
    if (refusedStartupParameter(error)) return false
    throw error
  } finally {
    await sql.end({ timeout: 1 })
  }
}

/** PostgreSQL through postgres.js, with the timeouts and deadlines of CONTRACT §7. */
export async function connectPostgres (options: PostgresOptions): Promise<Database> {
  const target = parseDatabaseUrl(options.url)
  const connector = createConnector(target, { connectTimeoutMs: CONNECT_TIMEOUT_MS, answerDeadlineMs: ANSWER_DEADLINE_MS })
  const startupTimeouts = await acceptsStartupTimeouts(target, connector).catch((error: unknown) => { connector.stop(); throw error })
  const client = postgres({
    ...clientOptions(target, connector, { applicationName: options.applicationName, startupTimeouts }),
    max: options.poolMax,
    prepare: startupTimeouts,
    // No pipelining: a query gets a connection of its own or waits in the pool's queue, so
    // "waiting for a connection" is a state the acquire timeout below can see and bound.
    // (A documented option that postgres.js's types leave out.)
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
  const probe = postgres({ ...clientOptions(target, probeConnector, { applicationName: `${options.applicationName ?? 'user-management'}-probe`, startupTimeouts }), max: 1, max_lifetime: 30 * 60 })
  async function probed<T> (query: PromiseLike<T>, timeoutMs: number): Promise<T> {
    try {
      return await withTimeout(query, timeoutMs)
    } catch (error) {
      probeConnector.destroyAll()
      throw error
    }
  }
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 1000
  // The queries in flight, oldest first, each with the time it was asked for (not a Map: see
  // src/arrival-queue.ts); and the statements running in transactions of their own.
  const inFlight = createArrivalQueue<PendingQuery>()
  let inTransactions = 0
  let acquireTimeouts = 0

  // postgres.js has no acquire timeout: a query waits in its queue for as long as the
  // database stays away. So a sweep looks at the queries asked for over acquireTimeoutMs ago;
  // one still not on a connection is taken out of the queue and fails with
  // UMS_DB_ACQUIRE_TIMEOUT (503). Once sent, statement_timeout bounds it on the server.
  const acquireSweep = setInterval(() => {
    inFlight.sweep(Date.now() - acquireTimeoutMs, (query) => {
      if (onConnection(query)) return 'keep'
      acquireTimeouts++
      failWaiting(query, new AcquireTimeoutError(acquireTimeoutMs))
      return 'drop'
    })
  }, ACQUIRE_SWEEP_MS)
  acquireSweep.unref()

  /** A server that refuses writes (a demoted primary) loses the connection, so the next finds the writable host. */
  function dropIfRefusing (query: PromiseLike<unknown>): void {
    query.then(undefined, (error: unknown) => { if (refusesWrites(error)) connector.dropLastAnswered() })
  }

  function tracked (query: PendingQuery): PendingQuery {
    const seq = inFlight.add(query, Date.now())
    const settle = () => { inFlight.remove(seq) }
    query.then(settle, settle)
    dropIfRefusing(query)
    return query
  }

  /** `work` on a connection of its own, in a transaction that sets the server-side timeouts first. */
  async function inTransaction<T> (work: (sql: ReservedSql) => Promise<T>): Promise<T> {
    const reserving = client.reserve()
    let reserved: ReservedSql
    try {
      reserved = await withTimeout(reserving, acquireTimeoutMs)
    } catch (error) {
      if (!(error instanceof DatabaseTimeoutError)) throw error
      acquireTimeouts++
      reserving.then((late) => late.release(), () => {})
      throw new AcquireTimeoutError(acquireTimeoutMs)
    }
    inTransactions++
    try {
      await reserved.unsafe(BEGIN_WITH_TIMEOUTS)
      const result = await work(reserved)
      await reserved.unsafe('commit')
      return result
    } catch (error) {
      await reserved.unsafe('rollback').catch(() => {})
      throw error
    } finally {
      inTransactions--
      reserved.release()
    }
  }

  /**
   * Drizzle's `client.unsafe(statement, params, options)`, optionally with `.values()`: the
   * pool's query, tracked for the acquire timeout; or, behind a pooler, the same in a
   * transaction of its own (a thenable Drizzle cannot tell from a query).
   */
  function unsafe (statement: string, params?: unknown[], queryOptions?: object) {
    if (startupTimeouts) return tracked(client.unsafe(statement, params as never[], queryOptions) as unknown as PendingQuery)
    let values = false
    const run = () => inTransaction(async (sql) => {
      const query = sql.unsafe(statement, params as never[], { ...queryOptions, prepare: false })
      dropIfRefusing(query)
      return await (values ? query.values() : query)
    })
    const lazy = {
      values: () => { values = true; return lazy },
      then: <A, B>(fulfilled?: (rows: unknown) => A, rejected?: (error: unknown) => B) => run().then(fulfilled, rejected)
    }
    return lazy
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
    copyUserPage: (after, size, onText) => {
      const statement = userCopyPageSql(after, size, 'stdout')
      if (startupTimeouts) return copyOut(tracked(client.unsafe(statement) as unknown as PendingQuery), onText)
      return inTransaction((sql) => copyOut(sql.unsafe(statement) as unknown as PendingQuery, onText))
    },
    usersByIds: async (ids) => await unsafe(USERS_BY_IDS_SQL, [ids as number[]], { prepare: true }) as UserRecord[],
    poolStats: () => {
      let queries = inTransactions
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
