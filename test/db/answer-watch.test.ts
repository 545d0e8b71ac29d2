import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import t from 'tap'
import { createAnswerWatch } from '../../src/db/answer-watch.js'

/** A stand-in socket: `write` and `data` are all the watch looks at. */
function fakeSocket () {
  const socket = Object.assign(new EventEmitter(), {
    destroyed: false,
    reason: undefined as Error | undefined,
    write: () => true,
    destroy (error?: Error) { socket.destroyed = true; socket.reason = error }
  })
  return socket as unknown as Socket & { destroyed: boolean, reason: Error | undefined }
}

t.test('a socket awaiting an answer past the deadline is destroyed, with the idle ones silent since; the others stay', async (t) => {
  let now = 0
  const watch = createAnswerWatch({ answerDeadlineMs: 6000, now: () => now })
  t.teardown(watch.stop)
  const [stuck, answered, silentIdle, busyIdle] = [fakeSocket(), fakeSocket(), fakeSocket(), fakeSocket()].map((s) => watch.watch(s, 'db1:5432') as typeof s)
  now = 1000
  stuck.write('query')
  answered.write('query')
  now = 1500
  answered.emit('data', Buffer.from('answer'))
  busyIdle.emit('data', Buffer.from('answer'))
  now = 6999
  t.equal(watch.sweep(), 0, 'nothing past the deadline yet')
  now = 7000
  t.equal(watch.sweep(), 2, 'the stuck socket and the idle one silent since it wrote')
  t.strictSame([stuck.destroyed, answered.destroyed, silentIdle.destroyed, busyIdle.destroyed], [true, false, true, false])
  // The stuck socket's query fails with the reason, which the log gives (the idle one had none).
  t.strictSame([stuck.reason?.message, (stuck.reason as { code?: string } | undefined)?.code, silentIdle.reason], ['no answer from db1:5432 within 6000 ms: connection destroyed', 'UMS_DB_NO_ANSWER', undefined])
})

t.test('the last socket that answered is known; every socket can go at once', async (t) => {
  const watch = createAnswerWatch({ answerDeadlineMs: Infinity })
  const [first, second] = [fakeSocket(), fakeSocket()].map((s) => watch.watch(s, 'db1:5432'))
  t.equal(watch.lastAnswered(), undefined, 'nothing answered yet')
  first.emit('data', Buffer.from('a'))
  second.emit('data', Buffer.from('b'))
  t.equal(watch.lastAnswered(), second)
  watch.destroyAll()
  t.strictSame([first.destroyed, second.destroyed], [true, true])
})
