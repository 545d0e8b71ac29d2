import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import type { Sql } from 'postgres'
import t from 'tap'
import { StatementCancelledError } from '../../src/db/pg-errors.js'
import { cancelRunning, type PendingQuery } from '../../src/db/postgres-internals.js'
import { BEGIN_WITH_TIMEOUTS } from '../../src/db/postgres-options.js'
import { createTransactions } from '../../src/db/transactions.js'

/** What the stand-in server does with a statement: answer it, refuse it, or let the sweep cancel it first. */
type Plan = 'answer' | 'refuse' | 'cancel, then answer' | 'cancel, then refuse'

const refusal = (code: string) => Object.assign(new Error(`refused ${code}`), { code, severity: 'ERROR' })

/**
 * One reserved connection of a stand-in postgres.js: each statement settles as `plans` say, a
 * turn later and through the query's `resolve`/`reject`, as postgres.js settles it on an answer.
 */
function reservedConnection (plans: Record<string, Plan>) {
  const socket = Object.assign(new EventEmitter(), { destroyed: false, destroy () { socket.destroyed = true } })
  const sent: string[] = []
  let released = false
  const reserved = {
    unsafe (statement: string) {
      sent.push(statement)
      const controls: Partial<PendingQuery> = {}
      const query = Object.assign(new Promise((resolve, reject) => Object.assign(controls, { resolve, reject })), controls, {
        state: { pid: 1, secret: 2 }
      }) as unknown as PendingQuery
      return query
    },
    release: () => { released = true }
  }
  // The pool's tracking, and its sweep where the plan says the statement outlives statement_timeout.
  const track = (query: PendingQuery): PendingQuery => {
    const plan = plans[sent[sent.length - 1]] ?? 'answer'
    if (plan.startsWith('cancel')) cancelRunning(query as PendingQuery & { state: { pid: 1, secret: 2 } }, (rejection) => new StatementCancelledError(5000, rejection), async () => true)
    setImmediate(() => plan.endsWith('refuse') ? query.reject(refusal('57014')) : query.resolve([]))
    return query
  }
  const client = { reserve: async () => reserved } as unknown as Sql
  const transactions = createTransactions(client, { lastAnswered: () => socket as unknown as Socket }, 1000, track, () => {})
  return { transactions, sent, socket, released: () => released }
}

async function outcome (plans: Record<string, Plan>, statement = 'insert') {
  const { transactions, sent, socket, released } = reservedConnection(plans)
  const failure = await transactions.run((send) => send(statement)).then(() => undefined, (error: Error) => error.name)
  return { failure, sent: sent.map((s) => s === BEGIN_WITH_TIMEOUTS ? 'begin' : s), released: released(), closed: socket.destroyed }
}

t.test('a transaction answered throughout is committed and its connection released', async (t) => {
  t.strictSame(await outcome({}), { failure: undefined, sent: ['begin', 'insert', 'commit'], released: true, closed: false })
})

t.test('a statement the server refused is rolled back, and the connection released', async (t) => {
  t.strictSame(await outcome({ insert: 'refuse' }), { failure: 'Error', sent: ['begin', 'insert', 'rollback'], released: true, closed: false })
})

// A CancelRequest may still be on its way to whatever the connection runs next: closed, never released.
t.test('a statement the sweep cancelled fails whatever the server answers, and its connection is closed', async (t) => {
  t.strictSame(await outcome({ commit: 'cancel, then answer' }), { failure: 'StatementCancelledError', sent: ['begin', 'insert', 'commit'], released: false, closed: true }, 'a COMMIT answered after its cancel (committed locally)')
  t.strictSame(await outcome({ insert: 'cancel, then refuse' }), { failure: 'StatementCancelledError', sent: ['begin', 'insert'], released: false, closed: true }, 'a statement refused after its cancel: no rollback')
  // A BEGIN a pooler held in its queue past the deadline, then ran: the connection is known from that answer.
  t.strictSame(await outcome({ [BEGIN_WITH_TIMEOUTS]: 'cancel, then answer' }), { failure: 'StatementCancelledError', sent: ['begin'], released: false, closed: true }, 'a BEGIN answered after its cancel')
  t.strictSame(await outcome({ [BEGIN_WITH_TIMEOUTS]: 'cancel, then refuse' }), { failure: 'StatementCancelledError', sent: ['begin'], released: false, closed: true }, 'a BEGIN refused after its cancel')
})
