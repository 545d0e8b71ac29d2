import { createServer, type Server, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'
import { createConnector } from '../../src/db/connector.js'

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
