import { createConnection, createServer, type Socket } from 'node:net'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { createTcpProxy } from './tcp-proxy.js'

/** A server that answers every chunk with itself: what comes back went both ways through the proxy. */
async function echoServer (t: Test) {
  const server = createServer((socket) => socket.on('error', () => {}).pipe(socket))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  // Closed after the proxy (tap runs teardowns in reverse), which has ended every connection to it by then.
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { host: '127.0.0.1', port: (server.address() as { port: number }).port }
}

/** A client connection that records what it receives and whether it was closed. */
async function client (port: number) {
  const socket: Socket = createConnection({ host: '127.0.0.1', port })
  const state = { received: '', closed: false, error: undefined as string | undefined }
  socket.on('data', (chunk) => { state.received += chunk })
  socket.on('error', (error: NodeJS.ErrnoException) => { state.error = error.code })
  socket.on('close', () => { state.closed = true })
  await new Promise((resolve) => { socket.once('connect', resolve); socket.once('close', resolve) })
  return { socket, state, send: (text: string) => { socket.write(text) } }
}

// How long a check that nothing arrives waits: loopback traffic would arrive well within it.
const SETTLE_MS = 150

/** Waits until `done` holds, for up to 5 s: what must arrive is waited for, not given a fixed time (a loaded machine). */
async function until (done: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 5000; !done() && Date.now() < deadline;) await sleep(10)
}

async function proxied (t: Test) {
  const proxy = await createTcpProxy(await echoServer(t))
  t.teardown(proxy.close)
  return proxy
}

t.test('forwards both ways while nothing is cut', async (t) => {
  const proxy = await proxied(t)
  const a = await client(proxy.port)
  a.send('hello')
  await until(() => a.state.received === 'hello')
  t.equal(a.state.received, 'hello')
  t.strictSame(proxy.connections(), { forwarding: 1, frozen: 0, blackHoled: 0 })
  a.socket.destroy()
})

t.test('refuse: open connections closed, new ones refused, then accepted again', async (t) => {
  const proxy = await proxied(t)
  const a = await client(proxy.port)
  await proxy.cut('refuse')
  await until(() => a.state.closed)
  t.ok(a.state.closed, 'the open connection was closed')
  const b = await client(proxy.port)
  t.equal(b.state.error, 'ECONNREFUSED')
  await proxy.restore()
  const c = await client(proxy.port)
  c.send('back')
  await until(() => c.state.received === 'back')
  t.equal(c.state.received, 'back')
  c.socket.destroy()
})

t.test('black-hole: open connections closed, new ones accepted and never answered', async (t) => {
  const proxy = await proxied(t)
  const a = await client(proxy.port)
  await proxy.cut('black-hole')
  const b = await client(proxy.port)
  b.send('anyone?')
  await sleep(SETTLE_MS)
  t.ok(a.state.closed, 'the open connection was closed')
  t.strictSame(b.state, { received: '', closed: false, error: undefined }, 'connected, silent')
  t.strictSame(proxy.connections(), { forwarding: 0, frozen: 0, blackHoled: 1 })
  await proxy.restore()
  await until(() => b.state.closed)
  t.ok(b.state.closed, 'restore closes the black-holed connections')
  const c = await client(proxy.port)
  c.send('back')
  await until(() => c.state.received === 'back')
  t.equal(c.state.received, 'back')
  c.socket.destroy()
})

t.test('half-open: open connections stay open and silent for good, new ones work', async (t) => {
  const proxy = await proxied(t)
  const a = await client(proxy.port)
  await proxy.cut('half-open')
  a.send('lost')
  const b = await client(proxy.port)
  b.send('fresh')
  await sleep(SETTLE_MS)
  t.strictSame(a.state, { received: '', closed: false, error: undefined }, 'the old connection is open and carries nothing')
  t.equal(b.state.received, 'fresh', 'a new connection works')
  t.strictSame(proxy.connections(), { forwarding: 1, frozen: 1, blackHoled: 0 })
  await proxy.restore()
  a.send('still lost')
  await sleep(SETTLE_MS)
  t.strictSame(a.state, { received: '', closed: false, error: undefined }, 'restore does not revive a frozen connection')
  a.socket.destroy()
  await until(() => proxy.connections().frozen === 0)
  t.strictSame(proxy.connections(), { forwarding: 1, frozen: 0, blackHoled: 0 }, 'the client closing it is what ends it')
  b.socket.destroy()
})

t.test('pause: nothing moves on open or new connections, then everything arrives on the same sockets', async (t) => {
  const proxy = await proxied(t)
  const a = await client(proxy.port)
  await proxy.cut('pause')
  a.send('held')
  const b = await client(proxy.port)
  b.send('queued')
  await sleep(SETTLE_MS)
  t.strictSame(a.state, { received: '', closed: false, error: undefined }, 'the open connection is silent')
  t.strictSame(b.state, { received: '', closed: false, error: undefined }, 'so is a new one')
  await proxy.restore()
  await until(() => a.state.received === 'held' && b.state.received === 'queued')
  t.strictSame(a.state, { received: 'held', closed: false, error: undefined }, 'the held data arrives, the socket is the same')
  t.strictSame(b.state, { received: 'queued', closed: false, error: undefined })
  a.send('+more')
  await until(() => a.state.received === 'held+more')
  t.equal(a.state.received, 'held+more')
  a.socket.destroy()
  b.socket.destroy()
})
