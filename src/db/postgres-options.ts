import postgres from 'postgres'
import { describeHost, type DatabaseTarget } from '../config/database-url.js'
import type { Connector } from './connector.js'
import { refusedStartupParameter } from './pg-errors.js'

/** PostgreSQL's own bounds (CONTRACT §7). */
export const STATEMENT_TIMEOUT_MS = 5000
export const IDLE_IN_TRANSACTION_MS = 10_000
/** Past this, a socket awaiting an answer is on a dead path: a little above statement_timeout. */
export const ANSWER_DEADLINE_MS = STATEMENT_TIMEOUT_MS + 1000
export const CONNECT_TIMEOUT_MS = 1000
/** Where the server-side timeouts cannot come in the startup packet, they open every transaction. */
export const BEGIN_WITH_TIMEOUTS = `begin; set local statement_timeout = ${STATEMENT_TIMEOUT_MS}; set local idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`

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
export async function acceptsStartupTimeouts (target: DatabaseTarget, connector: Connector): Promise<boolean> {
  const sql = postgres({ ...clientOptions(target, connector, { startupTimeouts: true }), max: 1 })
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
