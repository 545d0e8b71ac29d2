import { createServer, type Server, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'
import { createConnector } from '../../src/db/connector.js'
import { message } from '../support/protocol-messages.js'

/** Two listeners standing in for two database hosts; each counts the connections it accepted. */
async function twoHosts (t: Test) {
  const accepted = [0, 0]
  const servers: Server[] = []
  const ports: number[] = []
  for (const i of [0, 1]) {
    const server = createServer((socket: Socket) => { accepted[i]++; socket.on('error', () => {}) })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    servers.push(server)
    ports.push((server.address() as { port: number }).port)
  }
  t.teardown(() => Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve)))))
  return { accepted, hosts: ports.map((port) => `127.0.0.1:${port}`).join(',') }
}

for (const [attrs, expected] of [['any', [4, 0]], ['read-write', [2, 2]]] as const) {
  t.test(`target_session_attrs=${attrs}: which host each new connection tries first`, async (t) => {
    const { accepted, hosts } = await twoHosts(t)
    const connector = createConnector(parseDatabaseUrl(`postgres://app@${hosts}/users?sslmode=disable&target_session_attrs=${attrs}`), { connectTimeoutMs: 1000, answerDeadlineMs: Infinity })
    t.teardown(() => { connector.destroyAll(); connector.stop() })
    for (let i = 0; i < 4; i++) await connector.open()
    // Both answer: `any` keeps to the URL's order, as libpq does; the others take turns, so that
    // postgres.js's check, which closes a standby and asks again, reaches the next host.
    await new Promise((resolve) => setTimeout(resolve, 100))
    t.strictSame(accepted, expected)
  })
}

t.test('a primary whose connection was closed for a refused write is tried before a standby that closed at once', async (t) => {
  // Host 0 stands for a standby postgres.js refuses (its connections close at once), host 1 for
  // a primary read-only for a while: it answers, and its connection is closed for a refused write.
  const accepted = [0, 0]
  const standby = createServer((socket: Socket) => { accepted[0]++; socket.on('error', () => {}); socket.destroy() })
  const primary = createServer((socket: Socket) => { accepted[1]++; socket.on('error', () => {}); socket.on('data', () => socket.write(message('Z', Buffer.from('I')))) })
  const ports: number[] = []
  for (const server of [standby, primary]) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    ports.push((server.address() as { port: number }).port)
    t.teardown(() => new Promise((resolve) => server.close(resolve)))
  }
  const connector = createConnector(parseDatabaseUrl(`postgres://app@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}/users?sslmode=disable`), { connectTimeoutMs: 1000, answerDeadlineMs: Infinity })
  t.teardown(() => { connector.destroyAll(); connector.stop() })
  const closed = (socket: Socket) => new Promise((resolve) => socket.destroyed ? resolve(undefined) : socket.once('close', resolve))

  await closed(await connector.open())
  const onPrimary = await connector.open()
  t.strictSame(accepted, [1, 1], 'the standby first, in turn, then the primary')
  onPrimary.write('x')
  await new Promise((resolve) => onPrimary.once('data', resolve))
  connector.dropLastAnswered()
  await closed(onPrimary)
  // Both hosts closed a connection within a second of opening it; only the standby failed.
  const again = await connector.open()
  t.teardown(() => again.destroy())
  t.strictSame(accepted, [1, 2], 'the primary again, not the standby')
})
