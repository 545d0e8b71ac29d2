import { EventEmitter } from 'node:events'
import { connect, createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { createCancels } from '../../src/db/cancels.js'
import { int32s } from '../support/protocol-messages.js'

/** A listener standing for a database host: what each connection wrote, and a way to connect to it. */
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
  cancels.remember(connection, 1, { pid: 4242, secret: 3_000_000_000 })

  t.equal(await cancels.cancel({ pid: 4242, secret: 1 }), false, 'a key none of our connections has: nothing sent')
  t.equal(await cancels.cancel({ pid: 4242, secret: 3_000_000_000 }), true)
  t.strictSame(hostsAsked, [1], 'the connection\'s host')
  t.strictSame(Buffer.concat(received), int32s(16, 80877102, 4242, 3_000_000_000))
  connection.emit('close')
  t.equal(await cancels.cancel({ pid: 4242, secret: 3_000_000_000 }), false, 'forgotten once the connection closed')
  t.strictSame(hostsAsked, [1])
})

// postgres.js rewrites a connection's key object in place when the connection opens anew, which
// it may do while a cancel connects: the request names the statement it was sent for.
t.test('a cancel names the key it was asked for, even if the key object changes while it connects', async (t) => {
  const { received, connectTo } = await cancelListener(t)
  const cancels = createCancels(async () => {
    await new Promise((resolve) => setTimeout(resolve, 20))
    return await connectTo()
  }, 1000)
  const key = { pid: 4242, secret: 3_000_000_000 }
  cancels.remember(new EventEmitter() as Socket, 0, { ...key })
  const sent = cancels.cancel(key)
  Object.assign(key, { pid: 333, secret: 444 })
  t.equal(await sent, true)
  t.strictSame(Buffer.concat(received), int32s(16, 80877102, 4242, 3_000_000_000))
})
