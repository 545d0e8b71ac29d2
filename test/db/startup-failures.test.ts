import { createServer, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { freePort, spawnServer, TEST_SECRET } from '../server-process.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the start needs PostgreSQL'

// What a new user following the README met (issue 23): a codes-only line for each mistake. Each
// now names its cause in the server's words, on one line, with exit code 1 (CONTRACT §7).
const server = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const cases: Array<[string, string, RegExp]> = [
  ['a role that does not exist', `postgres://nobody_here@${server.host}/postgres`, /^Startup failed: PostgresError 28000: role "nobody_here" does not exist$/],
  ['a database that does not exist', `postgres://postgres@${server.host}/no_such_database`, /^Startup failed: PostgresError 3D000: database "no_such_database" does not exist$/],
  ['a host name that does not resolve', 'postgres://app@db.invalid/users', /^Startup failed: Error ENOTFOUND: getaddrinfo ENOTFOUND db\.invalid$/]
]
// With several hosts postgres.js retries a first query for good while no host takes it: the start
// once failed after Fastify's 10 s plugin timeout with a line that named no cause, and the CLI hung.
// The line names each host's failure, in the URL's order: it named the last host's only.
const [refused1, refused2] = [await freePort(), await freePort()]
cases.push(['several hosts, none of which takes a connection', `postgres://app@127.0.0.1:${refused1},127.0.0.1:${refused2}/users`,
  new RegExp(`^Startup failed: StartTimeoutError UMS_DB_NO_HOST: no host of 127\\.0\\.0\\.1:${refused1}, 127\\.0\\.0\\.1:${refused2} took a connection; each host's last failure: ` +
    `connect ECONNREFUSED 127\\.0\\.0\\.1:${refused1}; connect ECONNREFUSED 127\\.0\\.0\\.1:${refused2}$`)])
// Two hosts that take the connection and stay silent (hung servers): each is given the migrator's
// connect timeout in turn, as libpq would, and the line names both.
const silentPeers = await Promise.all([0, 1].map(async () => {
  const peer = createServer((socket) => { socket.on('error', () => {}) })
  await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve))
  return peer
}))
t.teardown(() => { for (const peer of silentPeers) { peer.close(); peer.unref() } })
const [silent1, silent2] = silentPeers.map((peer) => (peer.address() as { port: number }).port)
cases.push(['several hosts, each silent once connected', `postgres://app@127.0.0.1:${silent1},127.0.0.1:${silent2}/users?sslmode=disable`,
  new RegExp(`^Startup failed: StartTimeoutError UMS_DB_NO_HOST: no host of 127\\.0\\.0\\.1:${silent1}, 127\\.0\\.0\\.1:${silent2} took a connection; each host's last failure: ` +
    `no answer from 127\\.0\\.0\\.1:${silent1} to the startup message; write CONNECT_TIMEOUT 127\\.0\\.0\\.1:${silent2}$`)])
for (const [what, url, line] of cases) {
  t.test(`${what}: exit 1 and one line that says so`, { skip }, async (t) => {
    const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(await freePort()), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: url })
    t.strictSame(await started.exited, { code: 1, signal: null })
    const lines = started.stderr().trim().split('\n')
    t.equal(lines.length, 1, lines.join(' | '))
    t.match(lines[0], line)
  })
}

/** A listener on a free port that does `onConnection` with each connection: not PostgreSQL. */
async function impostor (t: Test, onConnection: (socket: Socket) => void): Promise<number> {
  const server = createServer((socket) => { socket.on('error', () => {}); onConnection(socket) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close(); server.unref() })
  return (server.address() as { port: number }).port
}

// A DATABASE_URL with a wrong port or host reaches whatever listens there. postgres.js waited on
// an answer in another protocol, or retried a connection closed before it was ready, for good:
// the start failed after Fastify's 10 s plugin timeout with a line that named no cause
// (`AVV_ERR_PLUGIN_EXEC_TIMEOUT ... 'db'`), or named `undefined:undefined` for the host.
const peers: Array<[string, (socket: Socket) => void, string, (port: number) => RegExp]> = [
  ['an HTTP server', (socket) => socket.once('data', () => socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')), 'sslmode=disable',
    (port) => new RegExp(`^Startup failed: NotPostgresError UMS_DB_NOT_POSTGRES: 127\\.0\\.0\\.1:${port} answered in a protocol other than PostgreSQL's: is it a PostgreSQL server or pooler, on the right port\\?$`)],
  ['an HTTP server, with sslmode=prefer', (socket) => socket.once('data', () => socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')), 'sslmode=prefer',
    (port) => new RegExp(`^Startup failed: NotPostgresError UMS_DB_NOT_POSTGRES: 127\\.0\\.0\\.1:${port} answered in a protocol`)],
  // A PostgreSQL that cannot start a backend: the postmaster writes a line of text and hangs up.
  ...['sslmode=disable', 'sslmode=prefer'].map((sslmode): typeof peers[number] => ['a postmaster that cannot fork, with ' + sslmode, (socket) => socket.end('Ecould not fork new process for connection: Cannot allocate memory\n\u0000'), sslmode,
    (port) => new RegExp(`^Startup failed: StartupRefusedError UMS_DB_STARTUP_REFUSED: 127\\.0\\.0\\.1:${port} refused the connection: could not fork new process for connection: Cannot allocate memory$`)]),
  // A reset (RST) instead of a close: Node's ECONNRESET, which names no host.
  ['a proxy that resets each connection', (socket) => socket.once('data', () => socket.resetAndDestroy()), 'sslmode=disable',
    (port) => new RegExp(`^Startup failed: NotReadyError UMS_DB_CLOSED_EARLY: 127\\.0\\.0\\.1:${port} closed the connection before it was ready$`)],
  ['a server that never answers', () => {}, 'sslmode=disable',
    (port) => new RegExp(`^Startup failed: Error CONNECT_TIMEOUT: write CONNECT_TIMEOUT 127\\.0\\.0\\.1:${port}$`)],
  ...['sslmode=disable', 'sslmode=prefer'].map((sslmode): typeof peers[number] => ['a proxy that closes each connection at once, with ' + sslmode, (socket) => socket.end(), sslmode,
    // In plain text postgres.js sees the close and the start retries to its bound; before the
    // SSLRequest's answer, the connection never reached postgres.js, and the start stops at once.
    (port) => new RegExp(sslmode === 'sslmode=disable'
      ? `^Startup failed: StartTimeoutError UMS_DB_NO_HOST: no host of 127\\.0\\.0\\.1:${port} took a connection within \\d+ ms; the last failure: 127\\.0\\.0\\.1:${port} closed the connection before it was ready$`
      : `^Startup failed: NotReadyError UMS_DB_CLOSED_EARLY: 127\\.0\\.0\\.1:${port} closed the connection before it was ready$`)])
]
for (const [what, onConnection, sslmode, line] of peers) {
  t.test(`a DATABASE_URL that reaches ${what}: exit 1, and one line that names the host and what it did`, async (t) => {
    const port = await impostor(t, onConnection)
    const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(await freePort()), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: `postgres://app@127.0.0.1:${port}/users?${sslmode}` })
    t.strictSame(await started.exited, { code: 1, signal: null })
    const lines = started.stderr().trim().split('\n')
    t.equal(lines.length, 1, lines.join(' | '))
    // Fastify's plugin timeout would have said AVV_ERR_PLUGIN_EXEC_TIMEOUT instead, naming no cause.
    t.match(lines[0], line(port))
  })
}
