import { execFile } from 'node:child_process'
import { accessSync, appendFileSync, chmodSync, chownSync, constants, copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import postgres from 'postgres'
import type { Test } from 'tap'
import { findProgram, spawnLogged, until } from '../deploy/processes.js'
import { freePort } from '../server-process.js'
import type { ServerCertificates } from './pg-certificates.js'

const run = promisify(execFile)

/** Debian keeps PostgreSQL's programs off PATH, one folder per major version: the newest installed, unless PG_BIN says. */
const pgBin = process.env.PG_BIN ?? newestPgBin()

function newestPgBin (): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'initdb'))) : []
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0] ?? '15'
  return join(root, newest, 'bin')
}
const isRoot = () => process.getuid?.() === 0
/** uid and gid of the postgres user, undefined when there is none. */
const pgUser = (([, uid, gid]) => uid ? { uid: Number(uid), gid: Number(gid) } : undefined)(
  /^postgres:[^:]*:(\d+):(\d+):/m.exec(readFileSync('/etc/passwd', 'utf8')) ?? [])
const ownByPostgres = (path: string) => { if (isRoot() && pgUser) chownSync(path, pgUser.uid, pgUser.gid) }

/** Why this machine cannot run servers of the test's own (tap's `skip`), or false when it can. */
export function pgServersSkip (needs: Array<'pgbouncer' | 'openssl'> = []): string | false {
  // They run with the PostgreSQL suite (CI's), not in a plain `npm test`: a minute of servers.
  if (!process.env.TEST_DATABASE_URL) return 'TEST_DATABASE_URL is not set: the tests with servers of their own run with the PostgreSQL suite'
  const missing = ['initdb', 'pg_ctl', 'pg_basebackup'].filter((p) => { try { accessSync(join(pgBin, p), constants.X_OK) } catch { return true } })
    // pgbouncer runs under setpriv, which drops to postgres and keeps the death signal.
    .concat(needs.flatMap((p) => p === 'pgbouncer' ? [p, 'setpriv'] : [p]).filter((p) => !findProgram(p)))
  if (missing.length) return `not installed: ${missing.join(', ')} (PostgreSQL programs looked for in ${pgBin})`
  if (isRoot()) return pgUser && findProgram('runuser') ? false : 'running as root needs a postgres user and runuser'
  return userInfo().username === 'postgres' ? false : 'initdb and pgbouncer need to run as root (to switch to postgres) or as postgres'
}

/** A temp folder the postgres user owns: initdb, pg_basebackup and pgbouncer write there as postgres. */
function ownedTempDir (t: Test, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  ownByPostgres(dir)
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** `program` as the postgres user (initdb, pg_ctl and pgbouncer refuse root), with none of our PG* variables. */
async function asPostgres (cwd: string, program: string, args: string[]): Promise<void> {
  const [command, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args]
  await run(command, argv, { cwd, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' }, timeout: 60_000 })
    .catch((error) => { throw new Error(`${program} ${args.join(' ')} failed: ${error.stderr || error.message}`) })
}

export interface PgServer {
  readonly port: number
  /** The server's temp folder: data in `data/`, log in `postgres.log`, Unix socket here too. */
  readonly dir: string
  url (database?: string, params?: Record<string, string>): string
  /** One statement on a connection of its own, closed after. */
  query (sql: string): Promise<Record<string, unknown>[]>
  stop (mode?: 'fast' | 'immediate'): Promise<void>
  start (): Promise<void>
  /** Ends recovery of a standby: it takes writes once this resolves. */
  promote (): Promise<void>
  createDatabase (name: string): Promise<void>
  /** The server log, to print when a test fails. */
  logs (): string
}

/** Starts the cluster made in `dir`/data; teardown stops it at once (and ownedTempDir removes it). */
async function startPgServer (t: Test, dir: string, port: number): Promise<PgServer> {
  const [data, log] = [join(dir, 'data'), join(dir, 'postgres.log')]
  const pgCtl = (...args: string[]) => asPostgres(dir, join(pgBin, 'pg_ctl'), ['-D', data, '-w', '-t', '60', ...args])
  const server: PgServer = {
    port,
    dir,
    url: (database = 'postgres', params = {}) => `postgres://postgres@127.0.0.1:${port}/${database}${Object.keys(params).length ? `?${new URLSearchParams(params)}` : ''}`,
    async query (sql) {
      const client = postgres(server.url(), { max: 1, onnotice: () => {}, connect_timeout: 10 })
      try { return [...await client.unsafe(sql)] } finally { await client.end() }
    },
    async stop (mode = 'fast') { await pgCtl('-m', mode, 'stop') },
    async start () { await pgCtl('-l', log, 'start').catch((error) => { throw new Error(`${error.message}\n${server.logs()}`) }) },
    async promote () {
      await pgCtl('promote')
      await until(`${port} out of recovery`, async () => (await server.query('select pg_is_in_recovery() as r'))[0].r === false)
    },
    async createDatabase (name) { await server.query(`create database "${name.replaceAll('"', '""')}"`) },
    logs: () => existsSync(log) ? readFileSync(log, 'utf8') : ''
  }
  // Registered after ownedTempDir's removal, so it runs before it (tap tears down in reverse).
  // Unconditional: a start that timed out may have left a postmaster; a stopped one just says so.
  t.teardown(() => server.stop('immediate').catch(() => {}))
  await server.start()
  return server
}

/** Settings both roles need; a standby gets its own port, socket and name over the primary's copy. */
const serverConf = (dir: string, port: number) =>
  `\nlisten_addresses = '127.0.0.1'\nport = ${port}\nunix_socket_directories = '${dir}'\ncluster_name = 'pg-${port}'\n`

/** A primary of the test's own, on a free port, trusting every local and 127.0.0.1 connection. */
export async function createPrimary (t: Test, options: { tls?: ServerCertificates, requireTls?: boolean, clientCa?: string } = {}): Promise<PgServer> {
  const [dir, port] = [ownedTempDir(t, 'ums-pg-'), await freePort()]
  const data = join(dir, 'data')
  await asPostgres(dir, join(pgBin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'])
  // Durability as in production, stated rather than assumed: fail-over tests reason about
  // what an acknowledged commit means.
  let conf = serverConf(dir, port) + 'wal_level = replica\nmax_wal_senders = 5\nfsync = on\nsynchronous_commit = on\n'
  // Each rule for ordinary and replication connections alike: standbys connect like clients.
  const rule = (type: string, method: string) => ['all', 'replication'].map((db) => `${type} ${db} all ${type === 'local' ? '' : '127.0.0.1/32 '}${method}\n`).join('')
  let hba = rule('local', 'trust')
  const tls = options.tls
  if (tls) {
    // The server refuses a key others can read; copies in the data folder keep the caller's files as they are.
    for (const [from, to] of [[tls.cert, 'server.crt'], [tls.key, 'server.key']]) {
      copyFileSync(from, join(data, to))
      chmodSync(join(data, to), 0o600)
      ownByPostgres(join(data, to))
    }
    conf += "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
    // With a client CA, a TLS connection must bring a certificate it signed, for the role it names.
    if (options.clientCa) {
      copyFileSync(options.clientCa, join(data, 'root.crt'))
      ownByPostgres(join(data, 'root.crt'))
      conf += "ssl_ca_file = 'root.crt'\n"
    }
    hba += (options.requireTls ? rule('hostnossl', 'reject') : '') + rule('hostssl', options.clientCa ? 'cert' : 'trust')
  }
  hba += rule('host', 'trust')
  appendFileSync(join(data, 'postgresql.conf'), conf)
  writeFileSync(join(data, 'pg_hba.conf'), hba)
  return startPgServer(t, dir, port)
}

/** A streaming standby of `primary`, synchronous (the primary's commits wait for it) unless told otherwise. */
export async function createStandby (t: Test, primary: PgServer, options: { synchronous?: boolean } = {}): Promise<PgServer> {
  const [dir, port] = [ownedTempDir(t, 'ums-pg-'), await freePort()]
  const data = join(dir, 'data')
  await asPostgres(dir, join(pgBin, 'pg_basebackup'), ['-R', '-X', 'stream', '-D', data, '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '--no-sync'])
  appendFileSync(join(data, 'postgresql.conf'), serverConf(dir, port))
  // The backup copies the primary's ALTER SYSTEM settings: a standby promoted with the
  // primary's synchronous_standby_names would wait forever for a standby of its own.
  appendFileSync(join(data, 'postgresql.auto.conf'), "synchronous_standby_names = ''\n")
  const standby = await startPgServer(t, dir, port)
  const state = async () => (await primary.query(`select state, sync_state from pg_stat_replication where application_name = 'pg-${port}'`))[0]
  await until(`standby ${port} streaming`, async () => (await state())?.state === 'streaming')
  if (options.synchronous ?? true) {
    // Only now: set before the standby streams, every commit on the primary would wait for it.
    await primary.query("alter system set synchronous_standby_names = '*'")
    await primary.query('select pg_reload_conf()')
    await until(`standby ${port} synchronous`, async () => (await state())?.sync_state === 'sync')
  }
  return standby
}

export interface PgBouncer { readonly port: number, url (database: string): string, logs (): string }

/**
 * PgBouncer (stock 1.18 settings but for the ones written here) in front of `target`, any
 * database name passed through, trusting every client. Killed at teardown.
 */
export async function startPgBouncer (t: Test, target: { port: number }, options: { poolMode?: 'transaction' | 'session', defaultPoolSize?: number } = {}): Promise<PgBouncer> {
  const [dir, port] = [ownedTempDir(t, 'ums-pgbouncer-'), await freePort()]
  const [ini, users] = [join(dir, 'pgbouncer.ini'), join(dir, 'userlist.txt')]
  writeFileSync(users, '"postgres" ""\n')
  // ignore_startup_parameters is left out on purpose: its default is what production runs with.
  writeFileSync(ini, `[databases]\n* = host=127.0.0.1 port=${target.port}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = ${port}\n` +
    `unix_socket_dir =\nauth_type = trust\nauth_file = ${users}\npool_mode = ${options.poolMode ?? 'transaction'}\nmax_client_conn = 200\ndefault_pool_size = ${options.defaultPoolSize ?? 20}\n`)
  // setpriv rather than runuser: runuser forks, and a kill would reach it, not pgbouncer. The
  // death signal goes on this setpriv, as spawnLogged's own is dropped when the user changes.
  const asUser = isRoot() ? ['--reuid=postgres', '--regid=postgres', '--init-groups'] : []
  const bouncer = spawnLogged(t, findProgram('setpriv')!, [...asUser, '--pdeathsig', 'KILL', '--', findProgram('pgbouncer')!, ini], {})
  const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`
  await until('pgbouncer answering', async () => {
    if (bouncer.child.exitCode !== null) throw new Error(`pgbouncer exited:\n${bouncer.output()}`)
    const client = postgres(url('postgres'), { max: 1, prepare: false, connect_timeout: 2, onnotice: () => {} })
    try { return (await client`select 1 as one`)[0].one === 1 } catch { return false } finally { await client.end() }
  })
  return { port, url, logs: bouncer.output }
}
