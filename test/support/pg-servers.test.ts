import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import t from 'tap'
import { until } from '../deploy/processes.js'
import { createCertificates } from './pg-certificates.js'
import { createPrimary, createStandby, pgServersSkip, startPgBouncer } from './pg-servers.js'

/** The error a promise rejects with (undefined when it resolves), for asserting on its fields. */
async function failure (promise: Promise<unknown>): Promise<any> {
  try { await promise } catch (error) { return error }
  return undefined
}

t.test('a synchronous standby has the primary\'s rows and takes writes once promoted', { skip: pgServersSkip() }, async (t) => {
  const primary = await createPrimary(t)
  const standby = await createStandby(t, primary)
  t.strictSame(await primary.query(`select sync_state from pg_stat_replication where application_name = 'pg-${standby.port}'`), [{ sync_state: 'sync' }])
  t.strictSame(await standby.query('select pg_is_in_recovery() as recovery'), [{ recovery: true }])
  await primary.query('create table things (id int primary key, name text)')
  await primary.query("insert into things values (1, 'written on the primary')")
  // synchronous_commit = on waits for the standby to flush the commit, not to replay it: the
  // table and its row may show there a moment later.
  const replayed = () => standby.query('select id, name from things').catch(() => [])
  await until('the row replayed on the standby', async () => (await replayed()).length > 0, 10_000)
  t.strictSame(await replayed(), [{ id: 1, name: 'written on the primary' }])

  await primary.stop('immediate')
  await standby.promote()
  t.strictSame(await standby.query('select pg_is_in_recovery() as recovery'), [{ recovery: false }])
  await standby.query("insert into things values (2, 'written after the fail-over')")
  t.strictSame(await standby.query('select id from things order by id'), [{ id: 1 }, { id: 2 }])
})

t.test('a TLS primary proves itself with the test CA and not with another', { skip: pgServersSkip(['openssl']) }, async (t) => {
  const certDir = mkdtempSync(join(tmpdir(), 'ums-certs-'))
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }))
  const certificates = await createCertificates(certDir, ['127.0.0.1', 'localhost'])
  const primary = await createPrimary(t, { tls: certificates })
  const connect = (ca: string) => postgres({
    host: '127.0.0.1', port: primary.port, user: 'postgres', database: 'postgres', max: 1, connect_timeout: 10,
    ssl: { ca: readFileSync(ca), rejectUnauthorized: true }
  })

  const trusted = connect(certificates.ca)
  t.teardown(() => trusted.end())
  t.strictSame([...await trusted`select ssl from pg_stat_ssl where pid = pg_backend_pid()`], [{ ssl: true }])

  const untrusted = connect(certificates.otherCa)
  t.teardown(() => untrusted.end())
  const error = await failure(untrusted`select 1`)
  t.equal(error?.code, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'a server certificate from an unknown CA is refused')

  // Unless the test asks for TLS only, plain connections work as well.
  const plain = postgres(primary.url(), { max: 1, ssl: false })
  t.teardown(() => plain.end())
  t.strictSame([...await plain`select ssl from pg_stat_ssl where pid = pg_backend_pid()`], [{ ssl: false }])
  const tlsOnly = await createPrimary(t, { tls: certificates, requireTls: true })
  const refused = postgres(tlsOnly.url(), { max: 1, ssl: false })
  t.teardown(() => refused.end())
  t.equal((await failure(refused`select 1`))?.code, '28000', 'pg_hba.conf rejects a plain connection')
})

t.test('PgBouncer passes queries and refuses startup parameters it does not know', { skip: pgServersSkip(['pgbouncer']) }, async (t) => {
  const primary = await createPrimary(t)
  const bouncer = await startPgBouncer(t, primary)
  t.teardown(() => { if (t.passing()) return; t.comment(bouncer.logs()) })

  const plain = postgres(bouncer.url('postgres'), { prepare: false, max: 1 })
  t.teardown(() => plain.end())
  t.strictSame([...await plain`select 1 as one`], [{ one: 1 }])

  const withTimeout = postgres(bouncer.url('postgres'), { prepare: false, max: 1, connection: { statement_timeout: 5000 } })
  t.teardown(() => withTimeout.end())
  const error = await failure(withTimeout`select 1`)
  t.equal(error?.code, '08P01')
  t.equal(/unsupported startup parameter/.test(error?.message), true, error?.message)
})
