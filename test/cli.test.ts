import { userInfo } from 'node:os'
import t, { type Test } from 'tap'
import argon2 from 'argon2'
import postgres from 'postgres'
import { buildCheckedApp } from './openapi/conformance.js'
import { openDatabase } from '../src/db/open-database.js'
import { migratePostgresDatabase } from '../src/db/migrate.js'
import { assertLoggedIn, createPostgresDatabase, testConfig } from './helper.js'
import { runCli } from './support/cli-process.js'

// Each run starts a Node process with tsx: about 1 s alone, 5-8 s each while other test files
// load the machine (the whole suite took this file to 118 s of the default 120).
t.setTimeout(300_000)
const CHEAP = { ARGON2_MEMORY_KIB: '256', ARGON2_ITERATIONS: '1' }

/** The CLI with cheap argon2, plus the given environment. */
const cli = (args: string[], env: Record<string, string> = {}, input = '') => runCli(args, { ...CHEAP, ...env }, input)

const events = (stdout: string) => stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line))
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

t.test('without a database', async (t) => {
  t.test('the development profile has no persistent database: exit 1 and says so', async (t) => {
    const run = await cli(['set-role', 'ana@example.com', 'ROLE_ADMIN'])
    t.equal(run.code, 1)
    t.match(run.stderr, /development profile has no persistent database[\s\S]*DATABASE_URL/)
    t.equal(run.stdout, '')
  })

  t.test('an unknown command or wrong arguments: what is wrong, then the usage, exit 1', async (t) => {
    const cases: Array<[string[], string]> = [
      [['frob'], 'Unknown command: frob'],
      [['set-role', 'ana@example.com'], 'set-role takes an e-mail and a role'],
      [['create-admin', 'ana'], 'create-admin takes a username and an e-mail'],
      [['migrate', 'now'], 'migrate takes no argument'],
      [['hash-benchmark', 'x'], 'hash-benchmark takes no argument']
    ]
    for (const [args, first] of cases) {
      const run = await cli(args)
      t.equal(run.code, 1, args.join(' '))
      t.equal(run.stderr.split('\n')[0], first, args.join(' '))
      t.match(run.stderr, /\nUsage: npm run cli -- <command> {3}\(node dist\/cli\.js <command> where only the build is installed\)\n/)
    }
  })

  t.test('help and an unknown command print the usage even where the configuration is wrong', async (t) => {
    const broken = { APP_PROFILE: 'production' }
    for (const word of ['help', '--help', '-h']) {
      const help = await cli([word], broken)
      t.strictSame([help.code, help.stderr], [0, ''], word)
      t.match(help.stdout, /^Usage: npm run cli -- <command> {3}\(node dist\/cli\.js <command> where only the build is installed\)\n/)
    }
    const unknown = await cli(['frob'], broken)
    t.strictSame([unknown.code, unknown.stdout], [1, ''])
    t.match(unknown.stderr, /^Unknown command: frob\nUsage: npm run cli -- <command> /)
  })

  t.test('a bad configuration is one line, exit 1', async (t) => {
    const run = await cli(['hash-benchmark'], { ARGON2_ITERATIONS: 'many' })
    t.equal(run.code, 1)
    t.equal(run.stderr, 'Invalid configuration: ARGON2_ITERATIONS must be an integer from 1 to 4294967295 (got "many")\n')
  })

  t.test('hash-benchmark prints the time of one hash and the logins per second', async (t) => {
    const run = await cli(['hash-benchmark'], { ARGON2_MEMORY_KIB: '1024', HASH_CONCURRENCY: '2' })
    t.equal(run.code, 0, run.stderr)
    t.match(run.stdout, /^argon2id m=1024 KiB, t=1, p=1: one hash takes \d+\.\d ms \(median of 5\)\nabout \d+\.\d logins\/s per core; \d+\.\d logins\/s for this instance \(HASH_CONCURRENCY=2, \d+ cores\)\n$/)
    t.equal(run.stderr, '', 'no warning for a fast hash')
  })
})

t.test('against PostgreSQL', { skip: process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the CLI changes PostgreSQL only' }, async (t) => {
  /** A migrated database of the case's own, with the accounts it needs inserted directly (fake hashes: they never log in). */
  async function setup (t: Test, accounts: Array<{ username: string, email: string, role: 'ROLE_USER' | 'ROLE_ADMIN' }> = []) {
    const url = await createPostgresDatabase(t)
    await migratePostgresDatabase(url)
    const sql = postgres(url, { max: 1, onnotice: () => {} })
    t.teardown(() => sql.end())
    for (const account of accounts) await sql`insert into users (username, email, password_hash, role) values (${account.username}, ${account.email}, 'not-a-real-hash', ${account.role})`
    const row = async (email: string) => (await sql`select id, username, email, role, password_hash from users where email = ${email}`)[0]
    return { url, sql, env: { DATABASE_URL: url }, row }
  }

  t.test('create-admin with ADMIN_PASSWORD creates a ROLE_ADMIN account that can log in', async (t) => {
    const { url, env, row } = await setup(t)
    const run = await cli(['create-admin', 'Jefa', 'Jefa@Example.com'], { ...env, ADMIN_PASSWORD: 'Secreto123' })
    t.equal(run.code, 0, run.stderr)
    const stored = await row('jefa@example.com')
    t.strictSame({ ...stored }, { id: 1, username: 'Jefa', email: 'jefa@example.com', role: 'ROLE_ADMIN', password_hash: stored.password_hash })
    t.ok(await argon2.verify(stored.password_hash, 'Secreto123'), 'argon2id hash of the given password')
    t.equal(run.stdout.split('\n')[0], `Created administrator Jefa <jefa@example.com> (id ${stored.id}) with ROLE_ADMIN.`)
    const [created] = events(run.stdout)
    // The service's own line (pino: level 30, msg): one query finds the CLI's events and the API's.
    t.strictSame({ ...created, time: 'x', actor: 'x', pid: 0, hostname: 'x' }, { level: 30, time: 'x', pid: 0, hostname: 'x', event: 'user_created', userId: stored.id, role: 'ROLE_ADMIN', source: 'cli', actor: 'x', msg: 'user_created' })
    t.match(created.time, ISO_UTC)
    t.notOk(run.stdout.includes('Secreto123') || run.stderr.includes('Secreto123'), 'the password is never printed')

    const database = await openDatabase(testConfig({ DATABASE_URL: url }), { persistent: true, poolMax: 2 })
    const app = await buildCheckedApp(testConfig(), { database, seed: false })
    t.teardown(async () => { await app.close(); await database.close() })
    const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'jefa@example.com', password: 'Secreto123' } })
    const token = assertLoggedIn(t, login, { id: stored.id, username: 'Jefa', email: 'jefa@example.com' })
    const admins = await app.inject({ method: 'GET', url: '/admin/users', headers: { authorization: `Bearer ${token}` } })
    t.equal(admins.statusCode, 200, 'the new administrator reads the listing')
    t.strictSame(admins.json(), [{ id: stored.id, username: 'Jefa', email: 'jefa@example.com', role: 'ROLE_ADMIN' }])
  })

  t.test('create-admin reads the password from standard input, exactly (only the line break dropped)', async (t) => {
    const { env, row } = await setup(t)
    const run = await cli(['create-admin', 'segunda', 'segunda@example.com'], env, ' Secreto123\n')
    t.equal(run.code, 0, run.stderr)
    const stored = await row('segunda@example.com')
    t.strictSame({ ...stored }, { id: 1, username: 'segunda', email: 'segunda@example.com', role: 'ROLE_ADMIN', password_hash: stored.password_hash })
    t.equal(run.stdout.split('\n')[0], `Created administrator segunda <segunda@example.com> (id ${stored.id}) with ROLE_ADMIN.`)
    t.ok(await argon2.verify(stored.password_hash, ' Secreto123'), 'the leading space is part of the password')
  })

  t.test('a weak password, a bad username or no password: the sign-up rules, exit 1, nothing stored', async (t) => {
    const { env, sql } = await setup(t)
    const weak = await cli(['create-admin', 'ab', 'debil@example.com'], { ...env, ADMIN_PASSWORD: 'secreto' })
    t.equal(weak.code, 1)
    t.equal(weak.stderr, 'The account breaks the sign-up rules:\n' +
      '  username: El username debe tener entre 3 y 20 caracteres\n' +
      '  password: La password debe tener entre 8 y 16 caracteres\n')
    const none = await cli(['create-admin', 'vacia', 'vacia@example.com'], env, '')
    t.equal(none.code, 1)
    t.equal(none.stderr, 'The account breaks the sign-up rules:\n  password: La password es obligatoria\n')
    t.equal((await sql`select count(*)::int as n from users`)[0].n, 0)
  })

  t.test('a duplicate account: exit 1, naming the field', async (t) => {
    const { env, sql } = await setup(t, [{ username: 'Jefa', email: 'jefa@example.com', role: 'ROLE_ADMIN' }])
    const run = await cli(['create-admin', 'JEFA', 'jefa@example.com'], { ...env, ADMIN_PASSWORD: 'Secreto123' })
    t.equal(run.code, 1)
    t.equal(run.stderr, 'Not created:\n  email: El email ya está registrado\n  username: El username ya está en uso\n')
    t.equal((await sql`select count(*)::int as n from users`)[0].n, 1, 'nothing stored')
  })

  t.test('usernames follow the API: the same rules, NFC storage and the NFKC + lower-case key', async (t) => {
    const { env, sql } = await setup(t, [{ username: 'Jefa', email: 'jefa@example.com', role: 'ROLE_ADMIN' }])
    const hidden = await cli(['create-admin', 'jefa\u200b', 'oculta@example.com'], { ...env, ADMIN_PASSWORD: 'Secreto123' })
    t.equal(hidden.code, 1)
    t.equal(hidden.stderr, 'The account breaks the sign-up rules:\n  username: El username no puede contener caracteres de control\n')
    const fullwidth = await cli(['create-admin', '\uff2a\uff25\uff26\uff21', 'ancha@example.com'], { ...env, ADMIN_PASSWORD: 'Secreto123' })
    t.equal(fullwidth.code, 1)
    t.equal(fullwidth.stderr, 'Not created:\n  username: El username ya está en uso\n')
    const decomposed = await cli(['create-admin', 'Jose\u0301', 'jose@example.com'], { ...env, ADMIN_PASSWORD: 'Secreto123' })
    t.equal(decomposed.code, 0, decomposed.stderr)
    const [stored] = await sql`select username, username_key from users where email = 'jose@example.com'`
    t.strictSame({ ...stored }, { username: 'Jos\u00e9', username_key: 'jos\u00e9' })
  })

  t.test('set-role changes the role, prints it and logs role_changed', async (t) => {
    const { env, row } = await setup(t, [{ username: 'segunda', email: 'segunda@example.com', role: 'ROLE_ADMIN' }])
    const { id } = await row('segunda@example.com')
    const run = await cli(['set-role', 'SEGUNDA@example.com', 'ROLE_USER'], env)
    t.equal(run.code, 0, run.stderr)
    t.equal((await row('segunda@example.com')).role, 'ROLE_USER')
    t.match(run.stdout, `Changed the role of segunda <segunda@example.com> (id ${id}): ROLE_ADMIN -> ROLE_USER.\n`)
    const logged = events(run.stdout)
    t.strictSame(logged.map((line) => ({ ...line, time: 'x', actor: 'x', pid: 0, hostname: 'x' })), [{ level: 30, time: 'x', pid: 0, hostname: 'x', event: 'role_changed', userId: id, previousRole: 'ROLE_ADMIN', role: 'ROLE_USER', source: 'cli', actor: 'x', msg: 'role_changed' }])
    t.match(logged[0]?.time, ISO_UTC)

    const again = await cli(['set-role', 'segunda@example.com', 'ROLE_USER'], env)
    t.equal(again.code, 0)
    t.equal(again.stdout, `segunda <segunda@example.com> (id ${id}) already has ROLE_USER: nothing changed.\n`, 'no change, no event')
  })

  t.test('an empty ADMIN_PASSWORD or SUDO_USER counts as unset: the password is read from standard input, the actor is the user running it', async (t) => {
    const { env, row } = await setup(t)
    const run = await cli(['create-admin', 'vacia', 'vacia@example.com'], { ...env, ADMIN_PASSWORD: '', SUDO_USER: '' }, 'Secreto123\n')
    t.equal(run.code, 0, run.stderr)
    t.ok(await argon2.verify((await row('vacia@example.com')).password_hash, 'Secreto123'), 'the piped password')
    const [created] = events(run.stdout)
    t.strictSame(created.actor, userInfo().username)
  })

  t.test('MIGRATIONS=off on a database nobody migrated: one line saying to run migrate, exit 1', async (t) => {
    const url = await createPostgresDatabase(t)
    for (const args of [['set-role', 'a@example.com', 'ROLE_USER'], ['create-admin', 'jefa', 'jefa@example.com']]) {
      const run = await cli(args, { DATABASE_URL: url, MIGRATIONS: 'off', ADMIN_PASSWORD: 'Secreto123' })
      t.strictSame([run.code, run.stderr], [1, 'The database is behind this release\'s migrations (no users table, or a column missing): run `migrate` first.\n'], args[0])
    }
  })

  t.test('an unknown e-mail or role: a clear message, exit 1', async (t) => {
    const { env, row } = await setup(t, [{ username: 'Jefa', email: 'jefa@example.com', role: 'ROLE_ADMIN' }])
    const unknownEmail = await cli(['set-role', 'nadie@example.com', 'ROLE_ADMIN'], env)
    t.equal(unknownEmail.code, 1)
    t.equal(unknownEmail.stderr, 'No account has the e-mail nadie@example.com.\n')
    const unknownRole = await cli(['set-role', 'jefa@example.com', 'ROLE_ROOT'], env)
    t.equal(unknownRole.code, 1)
    t.equal(unknownRole.stderr, 'Unknown role "ROLE_ROOT": use ROLE_USER or ROLE_ADMIN.\n')
    t.equal((await row('jefa@example.com')).role, 'ROLE_ADMIN', 'unchanged')
  })
})
