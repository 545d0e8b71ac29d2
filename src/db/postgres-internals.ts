import { readFileSync } from 'node:fs'
import { Socket } from 'node:net'
import { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import type { BackendKey } from './cancels.js'

const isPatched = (connection: string) => connection.includes('if (initial && connection.queue === queues.connecting') &&
  connection.includes('initial.cancelled ? onopen(connection)') && connection.includes('error(closingError ||') &&
  connection.includes('fetchArrayTypes().catch(noop)')
/** The installed driver's answer, read once: the migrations and the pool both ask at start. */
let installedIsPatched: boolean | undefined

/**
 * postgres.js 3.4.9 as patches/postgres+3.4.9.patch leaves it (applied by `npm ci`'s
 * postinstall, patch-package). Without it a connection that closes under load keeps what it was
 * doing for its next life, and the service pays for it:
 * - a statement sent on a reserved connection after its socket closed throws outside any
 *   promise and ends the process (porsager/postgres#1208; every transaction behind PgBouncer);
 * - a write still pending at the close is sent before the next startup message, and the
 *   connection never opens again;
 * - with several hosts, a connection's first query is neither failed nor forgotten when its
 *   server goes away: the next query's answer, rows or error, settles it;
 * - an error the server sent as it closed (PgBouncer's `query_wait_timeout`) fails the
 *   connection's next query, not the one it was running, which gets a bare CONNECTION_CLOSED;
 * - a connection whose first query was failed while it opened (the acquire timeout: over TLS or
 *   a slow link, a connection opens for the oldest waiting query) stays out of the pool, idle,
 *   for good: under steady load the pool never served again after a fail-over;
 * - a connection lost while it fetches its array types leaves an unhandled rejection.
 * test/db/postgres-internals.test.ts shows each against a real server or a fake one.
 */
export function assertDriverPatched (connection?: string): void {
  const patched = connection === undefined ? (installedIsPatched ??= isPatched(readFileSync(new URL('connection.js', import.meta.resolve('postgres')), 'utf8'))) : isPatched(connection)
  if (!patched) {
    throw new Error('postgres.js is not patched (patches/postgres+3.4.9.patch): install with `npm ci`, which applies it, not with --ignore-scripts; or run `npx patch-package`')
  }
}

/**
 * Everything of postgres.js that is not its documented API, read from 3.4.9's src/connection.js
 * and src/query.js, patched (test/db/postgres-internals.test.ts fails when an upgrade changes it):
 * - a query's `state` is null until a connection takes it, then that connection's backend key
 *   (`pid` and `secret`, BackendKeyData's), which a CancelRequest of ours names (cancelRunning):
 *   the connection's own object, which postgres.js rewrites when the connection opens anew;
 * - a connection that settles a query is handed the next waiting query (the connection's own
 *   `state` set on it) before any reaction to that settlement runs (sameConnection);
 * - a query on a connection settles through `resolve` or `reject`, which may be replaced first;
 * - `cancel()` on a query still waiting removes it from the queue and rejects it through
 *   `reject`, which may be replaced first to reject with an error of ours; a connection that
 *   was opening for that query (its first) keeps it through every host it tries and, once
 *   connected, skips it and joins the pool (patched);
 * - COPY … TO STDOUT data is pushed into the query's Readable, one message a push.
 * - postgres.js names a connection's errors (CONNECT_TIMEOUT, CONNECTION_CLOSED) after its
 *   socket's `host` and `port`, which its own connect sets (nameForErrors sets them on ours), and
 *   fails a connection's first query with an 'error' its socket emits (failStarting);
 * - with a `socket` factory (a documented option), postgres.js writes the startup message to
 *   the socket it is given at once: a factory's socket that fails does so after that first
 *   write (failingSocket), as a refused connection would.
 */
export interface PendingQuery extends Promise<unknown> {
  state: BackendKey | null
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
  readable (): Promise<Readable>
  cancel (): unknown
}

/** True once the query is on a connection (sent, or about to be). */
export const onConnection = (query: PendingQuery): query is PendingQuery & { state: BackendKey } => query.state !== null

/** True when `other` is on the connection that took `query`: `state` is that connection's one object, for all its lives. */
export const sameConnection = (other: PendingQuery, query: PendingQuery): boolean => query.state !== null && other.state === query.state

/** Takes a query that still waits for a connection out of the queue, failing it with `error`. */
export function failWaiting (query: PendingQuery, error: Error): void {
  const reject = query.reject
  query.reject = () => reject(error)
  query.cancel()
}

/**
 * Cancels a query that is on a connection: `sendCancel` sends its server a CancelRequest for the
 * query's backend (postgres.js's own `cancel()` would open that socket through the connection
 * factory, on whichever host comes next: src/db/cancels.ts). The query fails with what `fail`
 * makes of its settlement, a success included: a commit whose wait for a synchronous standby is
 * cancelled succeeds locally, unreplicated, and must not be acknowledged as if it had been
 * (`resolve` and `reject` are replaced as in failWaiting). `fail` is given the rejection, if any.
 */
export function cancelRunning (query: PendingQuery & { state: BackendKey }, fail: (rejection?: unknown) => unknown, sendCancel: (key: BackendKey) => Promise<unknown>): void {
  const reject = query.reject
  query.resolve = () => reject(fail())
  query.reject = (rejection) => reject(fail(rejection))
  // A cancel that cannot be sent leaves the statement to the answer deadline, which fails it.
  sendCancel(query.state).catch(() => {})
}

/**
 * Closes a database socket and tells postgres.js at once. Node emits 'close' only once the
 * handle has closed, a turn of the event loop later: until then postgres.js would hand its
 * connection, back in the pool since the last answer, to the next query, which would fail.
 */
export function closeAtOnce (socket: Socket): void {
  socket.destroy()
  socket.emit('close', false)
}

/**
 * Fails a connection still starting with `error`: postgres.js fails its first query with the
 * socket's 'error', heard here before postgres.js parses the chunk that showed it (its 'data'
 * listener comes after the connector's), so the error is ours, not a parse of foreign bytes.
 */
export function failStarting (socket: Socket, error: Error): void {
  socket.emit('error', error)
  socket.destroy()
}

/**
 * A socket for postgres.js's factory to resolve with when no host took the connection: it fails
 * with `error` at postgres.js's first write (the startup message), as a refused connection
 * would, and postgres.js hands that error to the waiting query (a rejected factory would leave
 * that query waiting for good).
 */
export function failingSocket (error: Error): Socket {
  const failed = new Socket()
  failed.write = (() => {
    process.nextTick(() => failed.destroy(error))
    return true
  }) as typeof failed.write
  return failed
}

/** Names `socket` as postgres.js names its own (which its own connect sets), for its errors' messages. */
export function nameForErrors (socket: Socket, { host, port }: { host: string, port: number }): void {
  Object.assign(socket, { host, port })
}

/**
 * Runs a `COPY … TO STDOUT` query, each message's bytes (a row) handed to `onData` as
 * postgres.js parses them: a slice of the socket's chunk, never an object or a string.
 * postgres.js pushes COPY data into a Readable and pauses the socket once that Readable's
 * buffer is full; if CopyDone came in the same chunk, the socket stays paused for good and
 * the connection's next query hangs (porsager/postgres#499, #1016). Taking the data at the
 * push leaves nothing buffered, so the socket is never paused.
 */
export async function copyOut (query: PendingQuery, onData: (bytes: Buffer) => void): Promise<void> {
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
