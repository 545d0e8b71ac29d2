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
  connector.refusedWrite()()
  await closed(onPrimary)
  // Both hosts closed a connection within a second of opening it; only the standby failed.
  const again = await connector.open()
  t.teardown(() => again.destroy())
  t.strictSame(accepted, [1, 2], 'the primary again, not the standby')
})

// A server whose connections are ready but whose first answer is slow (PgBouncer queueing its
// clients for a server connection) still starts: the start-up bound is for connections that
// never get ready, and a ready one leaves the query to a query's bounds.
t.test('one host: a first query slower than the start-up bound still starts once a connection is ready', async (t) => {
  const server = createServer((socket: Socket) => { socket.on('error', () => {}); socket.once('data', () => socket.write(Buffer.concat([message('R', Buffer.from([0, 0, 0, 0])), message('Z', Buffer.from('I'))]))) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const connector = createConnector(parseDatabaseUrl(`postgres://app@127.0.0.1:${(server.address() as { port: number }).port}/users?sslmode=disable`), { connectTimeoutMs: 1000, answerDeadlineMs: Infinity })
  t.teardown(() => { connector.destroyAll(); connector.stop() })
  const slowAnswer = new Promise((resolve) => setTimeout(() => resolve('answered'), 5500))
  const starting = connector.started(() => slowAnswer)
  // The first query's connection, opened and made ready as postgres.js would.
  const socket = await connector.open()
  socket.write('startup')
  await new Promise((resolve) => socket.once('data', resolve))
  t.equal(await starting, 'answered', 'not a StartTimeoutError at 5 s')
})

// With several hosts postgres.js moves past a refusal without a word: the connector keeps it, so
// an acquire timeout or a failed start can say why. A postmaster that cannot start a backend
// answers in text, which postgres.js cannot read: the connection fails with it at once.
t.test('a server\'s refusal at startup is kept as its host\'s failure; a text-only one fails the connection', async (t) => {
  const tooMany = message('E', Buffer.from('SFATAL\u0000C53300\u0000Msorry, too many clients already\u0000\u0000'))
  const forkFailed = Buffer.from('Ecould not fork new process for connection: Cannot allocate memory\n\u0000')
  const ports: number[] = []
  for (const answer of [tooMany, forkFailed]) {
    const server = createServer((socket: Socket) => { socket.on('error', () => {}); socket.once('data', () => socket.end(answer)) })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise((resolve) => server.close(resolve)))
    ports.push((server.address() as { port: number }).port)
  }
  const failureOf = async (port: number) => {
    const connector = createConnector(parseDatabaseUrl(`postgres://app@127.0.0.1:${port}/users?sslmode=disable`), { connectTimeoutMs: 1000, answerDeadlineMs: Infinity })
    t.teardown(() => { connector.destroyAll(); connector.stop() })
    const socket = await connector.open()
    const errors: string[] = []
    socket.on('error', (error: Error & { code?: string }) => errors.push(`${error.code}: ${error.message}`))
    socket.write('startup')
    await new Promise((resolve) => socket.once('close', resolve))
    return { kept: connector.recentFailure(5000)?.message, errors }
  }
  t.strictSame(await failureOf(ports[0]), { kept: `127.0.0.1:${ports[0]} refused the connection: sorry, too many clients already`, errors: [] }, 'an ErrorResponse: postgres.js reads it itself')
  const text = `127.0.0.1:${ports[1]} refused the connection: could not fork new process for connection: Cannot allocate memory`
  t.strictSame(await failureOf(ports[1]), { kept: text, errors: [`UMS_DB_STARTUP_REFUSED: ${text}`] }, 'the text-only error')
})

// A connection the network reset said only `read ECONNRESET` in the log: with several hosts an
// operator could not tell which one. Its error now names the host it went to.
t.test('an error on an open connection names its host: a reset says address and port', async (t) => {
  const server = createServer((socket: Socket) => { setTimeout(() => socket.resetAndDestroy(), 50) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const { port } = server.address() as { port: number }
  const connector = createConnector(parseDatabaseUrl(`postgres://app@127.0.0.1:${port}/users?sslmode=disable`), { connectTimeoutMs: 1000, answerDeadlineMs: Infinity })
  t.teardown(() => { connector.destroyAll(); connector.stop() })
  const socket = await connector.open() as Socket
  // As postgres.js listens, after the connector handed the socket over.
  const error = await new Promise<NodeJS.ErrnoException & { address?: string, port?: number }>((resolve) => socket.once('error', resolve))
  t.strictSame([error.code, error.address, error.port], ['ECONNRESET', '127.0.0.1', port])
})
