import { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import * as schema from './schema.js'
import { AcquireTimeoutError } from './pg-errors.js'
import { withTimeout, type Database } from './database.js'
import { createArrivalQueue } from '../arrival-queue.js'
import type { UserRecord } from '../schemas/users.js'
import { MIGRATION_STATE_SQL, USERS_BY_IDS_SQL, userCopyPageSql } from './queries.js'
import { createSocketWatch } from './socket-watch.js'

/** PostgreSQL's own bound on a statement (CONTRACT §7). */
const STATEMENT_TIMEOUT_MS = 5000
/** Past this, a socket awaiting an answer is on a dead path: a little above statement_timeout. */
const ANSWER_DEADLINE_MS = STATEMENT_TIMEOUT_MS + 1000
/** How often queries are checked for the acquire timeout: each fails within this much of it. */
const ACQUIRE_SWEEP_MS = 100

export interface PostgresOptions {
  readonly url: string
  readonly poolMax: number
  readonly applicationName?: string
  /** Longest wait for a connection before a query fails with UMS_DB_ACQUIRE_TIMEOUT (CONTRACT §7: 1 s). */
  readonly acquireTimeoutMs?: number
}

/** The part of a postgres.js query this module relies on (postgres 3.4.x internals, pinned). */
interface PendingQuery extends Promise<unknown> {
  /** null until the query is handed to an open connection. */
  state: unknown
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
  readable (): Promise<Readable>
  cancel (): unknown
}

/** The postgres.js options both the pool and the health probe use. */
function clientOptions (options: PostgresOptions, watch: ReturnType<typeof createSocketWatch>) {
  return {
    // Sockets we open and watch (src/db/socket-watch.ts); over TLS postgres.js replaces the
    // socket's listeners, so TLS connections keep postgres.js's own sockets (README).
    ...(/[?&]sslmode=/.test(options.url) ? {} : { socket: watch.open }),
    connect_timeout: 1,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? 'user-management',
      statement_timeout: STATEMENT_TIMEOUT_MS,
      idle_in_transaction_session_timeout: 10000
    }
  }
}

/** PostgreSQL through postgres.js, with the timeouts and deadlines of CONTRACT §7. */
export function connectPostgres (options: PostgresOptions): Database {
  const watch = createSocketWatch({ answerDeadlineMs: ANSWER_DEADLINE_MS })
  const client = postgres(options.url, {
    ...clientOptions(options, watch),
    max: options.poolMax,
    // No pipelining: a query gets a connection of its own or waits in the pool's queue, so
    // "waiting for a connection" is a state the acquire timeout below can see and bound.
    // (A documented option that postgres.js's types leave out.)
    ...{ max_pipeline: 0 } as object,
    // postgres.js waits up to 20 s between connection attempts after repeated failures; a
    // database back after an outage would sit unused that long. At most 1 s here, with jitter.
    backoff: (retries) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: 60,
    max_lifetime: 30 * 60
  })
  // Health checks get a connection of their own: a probe that gives up destroys it, and never
  // holds one of the pool's (CONTRACT §7).
  const probeWatch = createSocketWatch({ answerDeadlineMs: ANSWER_DEADLINE_MS })
  const probe = postgres(options.url, { ...clientOptions({ ...options, applicationName: `${options.applicationName ?? 'user-management'}-probe` }, probeWatch), max: 1, max_lifetime: 30 * 60 })
  async function probed<T> (query: PromiseLike<T>, timeoutMs: number): Promise<T> {
    try {
      return await withTimeout(query, timeoutMs)
    } catch (error) {
      probeWatch.destroyAll()
      throw error
    }
  }
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 1000
  // The queries in flight, oldest first, each with the time it was asked for (not a Map: see
  // src/arrival-queue.ts).
  const inFlight = createArrivalQueue<PendingQuery>()
  let acquireTimeouts = 0

  // postgres.js has no acquire timeout: a query waits in its queue for as long as the
  // database stays away. So a sweep looks at the queries asked for over acquireTimeoutMs ago;
  // one still not on a connection is taken out of the queue by postgres.js's own cancel, and
  // fails with UMS_DB_ACQUIRE_TIMEOUT (503). Once sent, statement_timeout bounds it on the
  // server. One sweep for all queries rather than a timer each, on the path of every request.
  const acquireSweep = setInterval(() => {
    inFlight.sweep(Date.now() - acquireTimeoutMs, (query) => {
      if (query.state !== null) return 'keep'
      acquireTimeouts++
      const reject = query.reject
      query.reject = () => reject(new AcquireTimeoutError(acquireTimeoutMs))
      query.cancel()
      return 'drop'
    })
  }, ACQUIRE_SWEEP_MS)
  acquireSweep.unref()
  const unsafe = (...args: Parameters<typeof client.unsafe>) => {
    const query = client.unsafe(...args) as unknown as PendingQuery
    const seq = inFlight.add(query, Date.now())
    const settle = () => { inFlight.remove(seq) }
    query.then(settle, settle)
    return query
  }
  /**
   * `COPY … TO STDOUT`, each message's bytes (a row) handed to `onData` as postgres.js parses
   * them: a slice of the socket's chunk, never an object or a string.
   * postgres.js pushes COPY data into a Readable and pauses the socket once that Readable's
   * buffer is full; if CopyDone came in the same chunk, the socket stays paused for good and
   * the connection's next query hangs (porsager/postgres#499, #1016). Taking the data at the
   * push leaves nothing buffered, so the socket is never paused.
   */
  async function copyOut (statement: string, onData: (bytes: Buffer) => void): Promise<void> {
    const query = unsafe(statement) as unknown as PendingQuery
    const resolve = query.resolve
    query.resolve = (stream) => {
      (stream as Readable).push = (chunk: Buffer | null) => {
        if (chunk === null) return Readable.prototype.push.call(stream, null)
        onData(chunk)
        return true
      }
      resolve(stream)
    }
    // Called at once, before postgres.js sends the query: it makes it a simple-protocol stream.
    const stream = await query.readable()
    stream.resume()
    await finished(stream)
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
    copyUserPage: (after, size, onText) => copyOut(userCopyPageSql(after, size, 'stdout'), onText),
    usersByIds: async (ids) => await unsafe(USERS_BY_IDS_SQL, [ids as number[]], { prepare: true }) as unknown as UserRecord[],
    poolStats: () => {
      let queries = 0
      let waiting = 0
      inFlight.sweep(Infinity, (query) => {
        queries++
        if (query.state === null) waiting++
        return 'keep'
      })
      return { max: options.poolMax, inFlight: queries, waiting, acquireTimeouts }
    },
    async close () {
      clearInterval(acquireSweep)
      watch.stop()
      probeWatch.stop()
      await Promise.all([client.end({ timeout: 5 }), probe.end({ timeout: 1 })])
    }
  }
}
