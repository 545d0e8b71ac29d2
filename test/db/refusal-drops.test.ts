import t from 'tap'
import { createArrivalQueue } from '../../src/http/arrival-queue.js'
import type { PendingQuery } from '../../src/db/postgres-internals.js'
import { createRefusalDrops } from '../../src/db/refusal-drops.js'

/** A query as postgres.js makes it: a promise, and `state`, its connection's one object once on one. */
function query (state: object | null) {
  let settle!: (error?: Error) => void
  const promise = new Promise<void>((resolve, reject) => { settle = (error) => error ? reject(error) : resolve() }) as unknown as PendingQuery
  promise.catch(() => {})
  Object.assign(promise, { state })
  return { promise, settle }
}

const READ_ONLY = Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006', severity: 'ERROR' })
const turn = () => new Promise((resolve) => setImmediate(resolve))

function setup () {
  const inFlight = createArrivalQueue<PendingQuery>()
  let closes = 0
  let refusals = 0
  const drops = createRefusalDrops(inFlight, { refusedWrite: () => { refusals++; return () => { closes++ } } })
  const track = (q: ReturnType<typeof query>) => {
    const seq = inFlight.add(q.promise, Date.now())
    const leave = () => { inFlight.remove(seq) }
    q.promise.then(leave, leave)
    drops.dropIfRefusing(q.promise)
    return q
  }
  return { track, drops, closes: () => closes, refusals: () => refusals }
}

t.test('a connection that refused a write closes once the queries handed to it after have ended, not before', async (t) => {
  const { track, closes } = setup()
  const connection = {}
  const refused = track(query(connection))
  const handed = track(query(connection))
  const elsewhere = track(query({}))
  refused.settle(READ_ONLY)
  await turn()
  t.equal(closes(), 0, 'the read handed to it still runs')
  elsewhere.settle()
  await turn()
  t.equal(closes(), 0, 'another connection\'s query changes nothing')
  handed.settle()
  await turn()
  t.equal(closes(), 1, 'closed once nothing is left on it')
})

t.test('the listing\'s COPY counts until its rows end, not when its query settles', async (t) => {
  const { track, drops, closes } = setup()
  const connection = {}
  const refused = track(query(connection))
  const copy = track(query(connection))
  let rowsEnd!: () => void
  drops.copying(copy.promise, new Promise<void>((resolve) => { rowsEnd = resolve }))
  refused.settle(READ_ONLY)
  copy.settle()
  await turn()
  t.equal(closes(), 0, 'rows still coming')
  rowsEnd()
  await turn()
  t.equal(closes(), 1)
})

t.test('a pool never idle does not keep it past a second: it closes after the query that ends then', async (t) => {
  const { track, closes } = setup()
  const connection = {}
  const refused = track(query(connection))
  let handed = track(query(connection))
  refused.settle(READ_ONLY)
  const started = Date.now()
  while (Date.now() - started < 1100) {
    // As postgres.js does: the next query is on the connection before the last one's reactions run.
    const next = track(query(connection))
    handed.settle()
    handed = next
    await new Promise((resolve) => setTimeout(resolve, 50))
    if (closes() > 0) break
  }
  t.equal(closes(), 1, 'closed although queries were still handed to it')
  t.ok(Date.now() - started >= 1000, 'and not before the second')
  handed.settle()
})

t.test('a refusal of another kind, or success, leaves the connection alone', async (t) => {
  const { track, closes } = setup()
  const connection = {}
  track(query(connection)).settle(Object.assign(new Error('duplicate key'), { code: '23505', severity: 'ERROR' }))
  track(query(connection)).settle()
  await turn()
  t.equal(closes(), 0)
})

// Its close is a later turn: the socket that answered last may be another connection's, with a query on it.
t.test('a FATAL 57P01 (the server shutting down) that comes with the close ranks and closes nothing', async (t) => {
  const { track, closes, refusals } = setup()
  track(query({})).settle(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' }))
  await turn()
  t.strictSame([refusals(), closes()], [0, 0])
})
