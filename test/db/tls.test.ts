import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { eq } from 'drizzle-orm'
import t, { type Test } from 'tap'
import { users } from '../../src/db/schema.js'
import { until } from '../deploy/processes.js'
import { assertLoggedIn, assertSignedUp, errorBodies } from '../helper.js'
import { createCertificates, createClientCertificate } from '../support/pg-certificates.js'
import { createPrimary, pgServersSkip } from '../support/pg-servers.js'
import { productionApp } from '../support/production-app.js'
import { createTcpProxy } from '../support/tcp-proxy.js'
import { spawnServer, TEST_SECRET, freePort } from '../server-process.js'

// A server of the test's own with TLS, its certificate signed by a CA made here.
t.setTimeout(300_000)
const skip = pgServersSkip(['openssl'])

async function tlsServer (t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'ums-tls-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const certificates = await createCertificates(dir, ['127.0.0.1', 'localhost'])
  const server = await createPrimary(t, { tls: certificates })
  return { server, certificates }
}

t.test('verify-full against a CA file serves, and every connection of the service is encrypted', { skip }, async (t) => {
  const { server, certificates } = await tlsServer(t)
  for (const [index, host] of ['127.0.0.1', 'localhost'].entries()) {
    const { app, management } = await productionApp(t, `postgres://postgres@${host}:${server.port}/postgres?sslmode=verify-full&sslrootcert=${certificates.ca}`)
    const account = { username: `tls${index}`, email: `tls${index}@example.com` }
    const created = await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...account, password: 'Secreto123' } })
    await assertSignedUp(t, app, created, account, `signed up over TLS to ${host}`)
    const ready = await management.inject('/health/ready')
    t.strictSame([ready.statusCode, ready.json()], [200, { status: 'up', database: 'up' }])
  }
  const connections = await server.query("select a.application_name as name, s.ssl from pg_stat_activity a join pg_stat_ssl s using (pid) where a.application_name like 'user-management%' order by 1")
  t.ok(connections.length >= 2, `${connections.length} connections of the service`)
  t.strictSame(connections.filter((c) => c.ssl !== true), [], 'all encrypted')
})

// A cancel opens its socket as a connection does (src/db/connect-to.ts), TLS negotiation included:
// with verify-full it still reaches the server. (PostgreSQL takes a cancel over TLS or plain alike,
// and pg_hba does not apply to it, so the server side cannot tell which one came.)
t.test('a commit waiting for a synchronous standby that is gone, with verify-full: 503, and the cancel reaches the server', { skip }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ums-tls-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const certificates = await createCertificates(dir, ['127.0.0.1'])
  const server = await createPrimary(t, { tls: certificates })
  const { app } = await productionApp(t, `postgres://postgres@127.0.0.1:${server.port}/postgres?sslmode=verify-full&sslrootcert=${certificates.ca}`)
  await server.query("alter system set synchronous_standby_names = 'gone'")
  await server.query('select pg_reload_conf()')
  const answer = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username: 'tlscancel', email: 'tlscancel@example.com', password: 'Secreto123' } })
  t.strictSame([answer.statusCode, answer.json()], [503, errorBodies.unavailable])
  await until('the wait cancelled', async () => /canceling wait for synchronous replication due to user request/.test(server.logs()), 5000).catch(() => {})
  t.match(server.logs(), /WARNING: {2}canceling wait for synchronous replication due to user request/, 'the server cancelled the wait')
})

// CONTRACT §2's sslcert and sslkey: a server that takes only client certificates. Nothing
// checked that the pair was presented, only that it was read.
t.test('a server that takes only client certificates: the service presents its sslcert, and without one the start stops', { skip }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ums-tls-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const certificates = await createCertificates(dir, ['127.0.0.1'])
  const client = await createClientCertificate(dir, certificates, 'postgres')
  // Its own plain connections (server.query) are trusted; every TLS one must bring the certificate.
  const server = await createPrimary(t, { tls: certificates, clientCa: certificates.ca })
  const url = `postgres://postgres@127.0.0.1:${server.port}/postgres?sslmode=verify-full&sslrootcert=${certificates.ca}`
  const { app, management } = await productionApp(t, `${url}&sslcert=${client.cert}&sslkey=${client.key}`)
  const account = { username: 'certified', email: 'certified@example.com' }
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...account, password: 'Secreto123' } }), account)
  const ready = await management.inject('/health/ready')
  t.strictSame([ready.statusCode, ready.json()], [200, { status: 'up', database: 'up' }])
  const connections = await server.query("select s.client_dn as dn from pg_stat_activity a join pg_stat_ssl s using (pid) where a.application_name like 'user-management%'")
  t.ok(connections.length >= 2, `${connections.length} connections of the service`)
  t.strictSame(connections.filter((c) => c.dn !== '/CN=postgres'), [], 'each presented the client certificate')

  const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(await freePort()), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: url })
  t.strictSame(await started.exited, { code: 1, signal: null })
  t.strictSame(started.stderr().trim().split('\n'), ['Startup failed: PostgresError 28000: connection requires a valid client certificate'], 'without sslcert: one line, the server\'s reason')
})

t.test('a certificate the CA did not sign stops the start: exit 1, one line naming the problem', { skip }, async (t) => {
  const { server, certificates } = await tlsServer(t)
  const port = await freePort()
  const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(port), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: `postgres://postgres@127.0.0.1:${server.port}/postgres?sslmode=verify-full&sslrootcert=${certificates.otherCa}` })
  const exit = await started.exited
  t.strictSame(exit, { code: 1, signal: null })
  const lines = started.stderr().trim().split('\n')
  t.equal(lines.length, 1, lines.join(' | '))
  t.equal(lines[0], `Startup failed: TlsHandshakeError UNABLE_TO_VERIFY_LEAF_SIGNATURE: 127.0.0.1:${server.port} failed the TLS handshake: unable to verify the first certificate`, 'naming the host')
})

// libpq: with its default CA file present, `require` checks the chain as verify-ca does. The
// server's certificate is signed by another CA than that file's, so the handshake must fail.
t.test('require with libpq\'s default CA file checks the chain against it: another CA\'s certificate stops the start', { skip }, async (t) => {
  const { server, certificates } = await tlsServer(t)
  const home = mkdtempSync(join(tmpdir(), 'ums-home-'))
  t.teardown(() => rmSync(home, { recursive: true, force: true }))
  mkdirSync(join(home, '.postgresql'))
  copyFileSync(certificates.otherCa, join(home, '.postgresql', 'root.crt'))
  const started = spawnServer(t, { HOME: home, APP_PROFILE: 'production', PORT: String(await freePort()), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: `postgres://postgres@127.0.0.1:${server.port}/postgres?sslmode=require` })
  // Unchecked, the start would succeed and the process serve on: 60 s is the bound of that wait.
  t.strictSame(await Promise.race([started.exited, sleep(60_000).then(() => 'still running')]), { code: 1, signal: null })
  t.strictSame(started.stderr().trim().split('\n'), [`Startup failed: TlsHandshakeError UNABLE_TO_VERIFY_LEAF_SIGNATURE: 127.0.0.1:${server.port} failed the TLS handshake: unable to verify the first certificate`])
})

t.test('TLS through a path that goes silent (half-open): every answer within 11 s, a 200 within 10 s, ready within 15 s', { skip }, async (t) => {
  const { server } = await tlsServer(t)
  const proxy = await createTcpProxy({ host: '127.0.0.1', port: server.port })
  t.teardown(proxy.close)
  const { app, management } = await productionApp(t, `postgres://postgres@127.0.0.1:${proxy.port}/postgres?sslmode=require`)
  const account = { username: 'halfopen', email: 'half.open@example.com' }
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', payload: { ...account, password: 'Secreto123' } }), account)
  const [{ id }] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email))
  const token = assertLoggedIn(t, await app.inject({ method: 'POST', url: '/auth/login', payload: { email: account.email, password: 'Secreto123' } }), { ...account, id })
  const answers: Array<{ status: number, startedAt: number, ms: number }> = []
  let running = true
  const loop = async () => {
    while (running) {
      const startedAt = Date.now()
      const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}` } })
      answers.push({ status: me.statusCode, startedAt, ms: Date.now() - startedAt })
      await sleep(20)
    }
  }
  const loops = [loop(), loop(), loop(), loop()]
  await sleep(1000)
  await proxy.cut('half-open')
  const cutAt = Date.now()
  let readyAt: number | undefined
  while (Date.now() - cutAt < 15_000 && readyAt === undefined) {
    const ready = await management.inject('/health/ready')
    if (ready.statusCode === 200 && Date.now() - cutAt > 1000) readyAt = Date.now()
    await sleep(200)
  }
  await sleep(Math.max(0, cutAt + 12_000 - Date.now()))
  running = false
  await Promise.all(loops)
  const firstOk = answers.find((a) => a.status === 200 && a.startedAt > cutAt + 100)
  t.comment(`${answers.length} answers; slowest ${Math.max(...answers.map((a) => a.ms))} ms; first 200 after the cut ${firstOk ? firstOk.startedAt + firstOk.ms - cutAt : 'never'} ms; ready ${readyAt ? readyAt - cutAt : 'never'} ms`)
  t.strictSame(answers.filter((a) => a.ms > 11_000 || (a.status !== 200 && a.status !== 503)), [], 'every answer 200 or 503, within 11 s')
  t.ok(firstOk && firstOk.startedAt + firstOk.ms - cutAt < 10_000, 'a 200 within 10 s of the cut')
  t.ok(readyAt !== undefined, 'ready within 15 s')
})
