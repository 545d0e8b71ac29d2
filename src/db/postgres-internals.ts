import type { Socket } from 'node:net'
import { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'

/**
 * Everything of postgres.js that is not its documented API, in one place (read from 3.4.9's
 * src/connection.js and src/query.js; test/db/postgres-internals.test.ts fails when an upgrade
 * changes any of it):
 * - a query's `state` is null until a connection takes it;
 * - `cancel()` on a query still waiting removes it from the queue and rejects it through
 *   `reject`, which may be replaced first to reject with an error of ours; a connection that
 *   was opening for that query (its first) keeps it through every host it tries and, once
 *   connected, skips it and stays out of the pool, idle, until its socket closes
 *   (src/db/postgres.ts closes such sockets; shown against a real standby by
 *   test/db/failover.test.ts, not by the canary test, and harmless once postgres.js changes);
 * - COPY … TO STDOUT data is pushed into the query's Readable, one message a push.
 * - with a `socket` factory (a documented option), postgres.js writes the startup message to
 *   the socket it is given at once, and keeps what it has not written yet in a buffer that a
 *   close does not clear: a factory's socket that fails must do so after that first write
 *   (src/db/connector.ts).
 */
export interface PendingQuery extends Promise<unknown> {
  state: unknown
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
  readable (): Promise<Readable>
  cancel (): unknown
}

/** True once the query is on a connection (sent, or about to be). */
export const onConnection = (query: PendingQuery): boolean => query.state !== null

/** Takes a query that still waits for a connection out of the queue, failing it with `error`. */
export function failWaiting (query: PendingQuery, error: Error): void {
  const reject = query.reject
  query.reject = () => reject(error)
  query.cancel()
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
