import { drizzle } from 'drizzle-orm/postgres-js'
import { is, Placeholder, sql } from 'drizzle-orm'
import postgres from 'postgres'
import * as schema from './schema.js'
import { AcquireTimeoutError } from './pg-errors.js'
import { withTimeout, type Database } from './database.js'
import { sharedQueries } from './queries.js'

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
  reject: (error: unknown) => void
  cancel (): unknown
}

/** PostgreSQL through postgres.js, with the timeouts of CONTRACT §7. */
export function connectPostgres (options: PostgresOptions): Database {
  const client = postgres(options.url, {
    max: options.poolMax,
    // No pipelining: a query gets a connection of its own or waits in the pool's queue, so
    // "waiting for a connection" is a state the acquire timeout below can see and bound.
    // (A documented option that postgres.js's types leave out.)
    ...{ max_pipeline: 0 } as object,
    connect_timeout: 1,
    // postgres.js waits up to 20 s between connection attempts after repeated failures; a
    // database back after an outage would sit unused that long. At most 1 s here, with jitter.
    backoff: (retries) => (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: 60,
    max_lifetime: 30 * 60,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? 'user-management',
      statement_timeout: 5000,
      idle_in_transaction_session_timeout: 10000
    }
  })
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 1000
  const inFlight = new Set<PendingQuery>()
  let acquireTimeouts = 0

  // postgres.js has no acquire timeout: a query waits in its queue for as long as the
  // database stays away. So every query gets a timer; if it is still not on a connection
  // when the timer fires, postgres.js's own cancel takes it out of the queue, and it fails
  // with UMS_DB_ACQUIRE_TIMEOUT (503). Once sent, statement_timeout bounds it on the server.
  const unsafe = (...args: Parameters<typeof client.unsafe>) => {
    const query = client.unsafe(...args) as unknown as PendingQuery
    inFlight.add(query)
    const timer = setTimeout(() => {
      if (query.state !== null) return
      acquireTimeouts++
      const reject = query.reject
      query.reject = () => reject(new AcquireTimeoutError(acquireTimeoutMs))
      query.cancel()
    }, acquireTimeoutMs)
    const settle = () => { clearTimeout(timer); inFlight.delete(query) }
    query.then(settle, settle)
    return query
  }
  // Drizzle calls `unsafe` for every statement; everything else (options, begin) is the client's own.
  const guarded = new Proxy(client, {
    get: (target, property) => property === 'unsafe' ? unsafe : Reflect.get(target, property, target)
  })
  const db = drizzle({ client: guarded, schema })
  const queries = sharedQueries(db)
  const page = queries.userJsonPage.toSQL()

  return {
    db,
    driver: 'postgres',
    ping: async (timeoutMs = 1000) => { await withTimeout(db.execute(sql`select 1`), timeoutMs) },
    async migrationState (timeoutMs = 1000) {
      const [row] = await withTimeout(db.execute<{ applied: number, latest: string }>(queries.migrationState), timeoutMs)
      return { applied: row.applied, latest: Number(row.latest) }
    },
    async userJsonPage (after, size) {
      // Raw mode: the page's JSON arrives as one Buffer and goes to the socket as is, never
      // becoming a JS string (a 0.5 MB string lands in V8's large-object space).
      const values: Record<string, number> = { after, size }
      const params = page.params.map((param) => is(param, Placeholder) ? values[param.name] : param)
      const [row] = await (unsafe(page.sql, params as never[], { prepare: true }) as unknown as { raw (): Promise<Array<Array<Buffer | null>>> }).raw()
      const [json, last] = row ?? []
      return json && last ? { json, last: Number(last.toString('latin1')) } : undefined
    },
    poolStats: () => {
      let waiting = 0
      for (const query of inFlight) if (query.state === null) waiting++
      return { max: options.poolMax, inFlight: inFlight.size, waiting, acquireTimeouts }
    },
    close: () => client.end({ timeout: 5 })
  }
}
