import { createServer, type Socket } from 'node:net'
import t from 'tap'
import { assertLoggedIn, createPostgresDatabase } from '../helper.js'
import { freePort, http, spawnServer, TEST_SECRET, waitReady } from '../server-process.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the start needs PostgreSQL'

// A hung server (a postmaster stopped, a host under swap) takes the TCP connection and never
// answers the startup message. libpq's connect_timeout is per host: it goes on to the next one.
// postgres.js failed the start's first query with CONNECT_TIMEOUT instead, and every restart
// met the hung host first again: no instance started while the primary listed second was fine.
// With sslmode=prefer (libpq's default) the silent host fails our TLS negotiation's bound; with
// disable, postgres.js's connect timeout closes the connection. `any` does not turn to the next
// host by itself: only the silent host's avoidance sends the start's second ask elsewhere.
for (const query of ['target_session_attrs=read-write', 'target_session_attrs=any', 'target_session_attrs=read-write&sslmode=disable', 'target_session_attrs=any&sslmode=disable']) {
  t.test(`${query}, a silent host listed first: the start goes on to the next host and serves`, { skip }, async (t) => {
    t.setTimeout(90_000)
    const url = new URL(await createPostgresDatabase(t))
    const silent = createServer((socket: Socket) => { socket.on('error', () => {}) })
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    t.teardown(() => { silent.close(); silent.unref() })
    const silentPort = (silent.address() as { port: number }).port
    const database = `postgres://${url.username}@127.0.0.1:${silentPort},${url.host}${url.pathname}?${query}`
    const [port, managementPort] = [await freePort(), await freePort()]
    const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(port), MANAGEMENT_PORT: String(managementPort), JWT_SECRET: TEST_SECRET, DATABASE_URL: database, RATE_LIMITS: 'off' })
    await waitReady(started, 60_000)
    const account = { username: 'steady', email: 'steady@example.com', password: 'Secreto123' }
    const signedUp = await http(port, 'POST', '/auth/signup', { body: account })
    t.strictSame([signedUp.status, signedUp.json()], [201, { id: 1, username: 'steady', email: 'steady@example.com' }])
    const token = assertLoggedIn(t, await http(port, 'POST', '/auth/login', { body: { email: account.email, password: account.password } }), { id: 1, ...account })
    const me = await http(port, 'GET', '/users/me', { headers: { authorization: `Bearer ${token}` } })
    t.strictSame([me.status, me.json()], [200, { id: 1, username: 'steady', email: 'steady@example.com', role: 'ROLE_USER' }])
    t.equal(started.stderr(), '', 'nothing on stderr')
  })
}
