import postgres from 'postgres'
import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import type { Connector } from './connector.js'
import { refusedStartupParameter } from './pg-errors.js'

/** PostgreSQL's own bounds (CONTRACT §7). */
export const STATEMENT_TIMEOUT_MS = 5000
const IDLE_IN_TRANSACTION_MS = 10_000
/** Past this, a socket awaiting an answer is on a dead path: a little above statement_timeout. */
export const ANSWER_DEADLINE_MS = STATEMENT_TIMEOUT_MS + 1000
export const CONNECT_TIMEOUT_MS = 1000
/** Server-side timeouts a client asks for in its startup packet, in milliseconds. */
export interface ServerTimeouts { readonly statementMs: number, readonly idleInTransactionMs: number }
/** A request's (CONTRACT §7). */
export const REQUEST_TIMEOUTS: ServerTimeouts = { statementMs: STATEMENT_TIMEOUT_MS, idleInTransactionMs: IDLE_IN_TRANSACTION_MS }
/** Where the server-side timeouts cannot come in the startup packet, they open every transaction. */
export const BEGIN_WITH_TIMEOUTS = `begin; set local statement_timeout = ${STATEMENT_TIMEOUT_MS}; set local idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`

/**
 * postgres.js's options for a client of `target` whose sockets `connector` opens: it chooses
 * the host and negotiates TLS, so postgres.js is given no TLS. A standby is closed and the next host tried by postgres.js's `primary` check, also for
 * `read-write`, whose check in postgres.js lets a standby through (porsager/postgres#815); a
 * primary that refuses writes is left at its first refusal (`refusesWrites` below).
 */
export function clientOptions (target: DatabaseTarget, connector: Connector, { applicationName = 'user-management', timeouts }: { applicationName?: string, timeouts?: ServerTimeouts } = {}) {
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
      ...(timeouts ? { statement_timeout: timeouts.statementMs, idle_in_transaction_session_timeout: timeouts.idleInTransactionMs } : {})
    }
  }
}

/**
 * Whether the server takes `timeouts` in the startup packet. A transaction pooler refuses them
 * (PgBouncer's stock `ignore_startup_parameters`): then every statement runs in a transaction
 * that sets them first, and nothing is prepared by name, which such a pooler would lose between
 * transactions; the migrator does without (src/db/migrate.ts).
 */
export async function acceptsStartupTimeouts (target: DatabaseTarget, connector: Connector, timeouts = REQUEST_TIMEOUTS): Promise<boolean> {
  // Numbers, never 0: postgres.js leaves a falsy parameter out of the packet.
  const sql = postgres({ ...clientOptions(target, connector, { timeouts }), max: 1 })
  try {
    await connector.started(() => sql`select 1`)
    return true
  } catch (error) {
    if (refusedStartupParameter(error)) return false
    throw error
  } finally {
    await sql.end({ timeout: 1 })
  }
}
