import { EventEmitter } from 'node:events'
import { connect, createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { createCancels } from '../../src/db/cancels.js'

/** A server message: its type, its length, its body. */
const message = (type: string, body: Buffer) => {
  const head = Buffer.alloc(5)
  head.write(type)
  head.writeUInt32BE(4 + body.length, 1)
  return Buffer.concat([head, body])
}
const int32s = (...values: number[]) => Buffer.concat(values.map((v) => { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b }))
// What a server sends while a connection starts: a protocol version it offers instead, SASL's
// first challenge and its end, a notice, authentication ok, a parameter, the key (pid 4242,
// secret 3000000000), ready.
const startup = Buffer.concat([
  message('v', int32s(196608, 0)),
  message('R', Buffer.concat([int32s(10), Buffer.from('SCRAM-SHA-256\u0000\u0000')])),
  message('R', Buffer.concat([int32s(12), Buffer.from('v=c2lnbmF0dXJl')])),
  message('N', Buffer.from('SNOTICE\u0000Mhello\u0000\u0000')),
  message('R', int32s(0)),
  message('S', Buffer.from('server_version\u000015.0\u0000')),
  message('K', int32s(4242, 3_000_000_000)),
  message('Z', Buffer.from('I'))
])

/** A listener standing for a database host: what each connection wrote, and its port. */
async function cancelListener (t: Test) {
  const received: Buffer[] = []
  const server = createServer((socket) => socket.on('data', (data) => { received.push(data); socket.end() }))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const port = (server.address() as { port: number }).port
  const connectTo = () => new Promise<Socket>((resolve) => { const s = connect(port, '127.0.0.1', () => resolve(s)) })
  return { received, connectTo }
}

t.test('a cancel goes to the host of the connection whose server named the key, as a 16-byte CancelRequest, once it closes', async (t) => {
  const { received, connectTo } = await cancelListener(t)
  const hostsAsked: number[] = []
  const cancels = createCancels(async (hostIndex) => {
    hostsAsked.push(hostIndex)
    return await connectTo()
  }, 1000)

  const connection = new EventEmitter() as Socket
  cancels.watch(connection, 1)
  // The key read across chunks however the network cuts them: here one byte at a time.
  for (const byte of startup) connection.emit('data', Buffer.from([byte]))
  t.equal(connection.listenerCount('data'), 0, 'read no further than the key')

  t.equal(await cancels.cancel({ pid: 4242, secret: 1 }), false, 'a key none of our connections has: nothing sent')
  t.equal(await cancels.cancel({ pid: 4242, secret: 3_000_000_000 }), true)
  t.strictSame(hostsAsked, [1], 'the connection\'s host')
  t.strictSame(Buffer.concat(received), int32s(16, 80877102, 4242, 3_000_000_000))
  connection.emit('close')
  t.equal(await cancels.cancel({ pid: 4242, secret: 3_000_000_000 }), false, 'forgotten once the connection closed')
  t.strictSame(hostsAsked, [1])
})

t.test('a server that refuses the connection at startup names no key: nothing is kept, the reading stops', async (t) => {
  const cancels = createCancels(async () => { throw new Error('not asked') }, 1000)
  const connection = new EventEmitter() as Socket
  cancels.watch(connection, 0)
  connection.emit('data', message('E', Buffer.from('SFATAL\u0000C28000\u0000\u0000')))
  t.equal(connection.listenerCount('data'), 0)
  t.equal(await cancels.cancel({ pid: 0, secret: 0 }), false)
})

// postgres.js rewrites a connection's key object in place when the connection opens anew, which
// it may do while a cancel connects: the request names the statement it was sent for.
t.test('a cancel names the key it was asked for, even if the key object changes while it connects', async (t) => {
  const { received, connectTo } = await cancelListener(t)
  const cancels = createCancels(async () => {
    await new Promise((resolve) => setTimeout(resolve, 20))
    return await connectTo()
  }, 1000)
  const connection = new EventEmitter() as Socket
  cancels.watch(connection, 0)
  connection.emit('data', startup)
  const key = { pid: 4242, secret: 3_000_000_000 }
  const sent = cancels.cancel(key)
  Object.assign(key, { pid: 333, secret: 444 })
  t.equal(await sent, true)
  t.strictSame(Buffer.concat(received), int32s(16, 80877102, 4242, 3_000_000_000))
})

t.test('a key message of the wrong length stops the reading instead of throwing in the socket\'s data event', async (t) => {
  const cancels = createCancels(async () => { throw new Error('not asked') }, 1000)
  const connection = new EventEmitter() as Socket
  cancels.watch(connection, 0)
  connection.emit('data', message('K', int32s(4242)))
  t.equal(connection.listenerCount('data'), 0)
  t.equal(await cancels.cancel({ pid: 4242, secret: 0 }), false)
})
