import { availableParallelism, userInfo } from 'node:os'
import { createInterface } from 'node:readline/promises'
import { Writable } from 'node:stream'
import argon2 from 'argon2'
import { Value } from '@sinclair/typebox/value'
import { ConfigError, loadConfig, type Config } from './config.js'
import { NoPersistentDatabaseError, openDatabase } from './db/open-database.js'
import { migratePostgresDatabase, migrationTags } from './db/migrate.js'
import { DuplicateUserError } from './domain-errors.js'
import { duplicateFields, fieldErrors } from './error-bodies.js'
import { Role } from './schemas/common.js'
import { SignupBody } from './schemas/users.js'
import { securityEventLine, type SecurityEvent, type SecurityEventDetails } from './security-events.js'
import { argon2Options, createPasswordManager } from './users/password-manager.js'
import { createUsersRepository, type UsersRepository } from './users/users-repository.js'
import { generatePrivateKeyPem } from './tokens/signing-keys.js'
import { describeFailure } from './logger.js'
import { compileBodyValidator } from './validation.js'

const USAGE = `Usage: npm run cli -- <command>
  migrate                                 apply pending migrations (DATABASE_MIGRATION_URL, else
                                          DATABASE_URL) and print what was applied
  set-role <email> ROLE_USER|ROLE_ADMIN   change the role of an account
  create-admin <username> <email>         create an administrator; the password comes from
                                          ADMIN_PASSWORD or standard input, never the arguments
  hash-benchmark                          time one argon2id hash with the configured ARGON2_*
  generate-key EdDSA|ES256                print a new private key (PKCS#8 PEM) for JWT_PRIVATE_KEY`

/** A failure the operator can fix: its message is printed as is, and the exit code is 1. */
class CliError extends Error {}

// Who ran the command, for the audit trail of the security events.
function actor (): string {
  try {
    return process.env.SUDO_USER ?? userInfo().username
  } catch {
    return 'unknown'
  }
}

const event = (name: SecurityEvent, details: SecurityEventDetails) =>
  process.stdout.write(securityEventLine(name, { ...details, source: 'cli', actor: actor() }))

/** The configured PostgreSQL database, migrated to head, for the length of `work`. */
async function withUsers<T> (config: Config, work: (users: UsersRepository) => Promise<T>): Promise<T> {
  let database
  try {
    // The same locked migration the service runs at start, so the CLI can bootstrap an empty database.
    database = await openDatabase(config, { persistent: true, poolMax: 1, applicationName: 'user-management-cli' })
  } catch (error) {
    if (error instanceof NoPersistentDatabaseError) {
      throw new CliError('The development profile has no persistent database: its PGlite lives inside the server process and is\n' +
        'created afresh at each start. Set DATABASE_URL to the PostgreSQL database to change (production always has one).')
    }
    throw new CliError(`Cannot open the database: ${describeFailure(error)}`)
  }
  try {
    return await work(createUsersRepository(database))
  } finally {
    await database.close()
  }
}

async function setRole (config: Config, [email, role, ...extra]: string[]): Promise<void> {
  if (!email || !role || extra.length > 0) throw new CliError(USAGE)
  if (!Value.Check(Role, role)) throw new CliError(`Unknown role "${role}": use ROLE_USER or ROLE_ADMIN.`)
  await withUsers(config, async (users) => {
    const account = await users.findByEmail(email)
    if (!account) throw new CliError(`No account has the e-mail ${email}.`)
    if (account.role === role) {
      process.stdout.write(`${account.username} <${account.email}> (id ${account.id}) already has ${role}: nothing changed.\n`)
      return
    }
    await users.setRole(account.email, role)
    process.stdout.write(`Changed the role of ${account.username} <${account.email}> (id ${account.id}): ${account.role} -> ${role}.\n` +
      'Tokens issued before now keep the old role until they expire (JWT_EXPIRATION).\n')
    event('role_changed', { userId: account.id, previousRole: account.role, role })
  })
}

/** The sign-up rules as the API applies them, so the CLI cannot drift from it. */
function signupProblems (body: unknown): Record<string, string> | undefined {
  // TypeBox's own Value.Check would not do: it compiles patterns without the `u` flag and
  // ignores `not`, so it would judge passwords differently from the API.
  const validate = compileBodyValidator(SignupBody)
  return validate(body) ? undefined : fieldErrors((validate.errors ?? []) as Parameters<typeof fieldErrors>[0])
}

/** ADMIN_PASSWORD, else standard input: a prompt without echo on a terminal, the first line of a pipe. */
async function readPassword (): Promise<string> {
  if (process.env.ADMIN_PASSWORD !== undefined) return process.env.ADMIN_PASSWORD
  const silent = new Writable({ write (_chunk, _encoding, done) { done() } })
  if (process.stdin.isTTY) process.stderr.write('Password: ')
  const lines = createInterface({ input: process.stdin, output: silent, terminal: Boolean(process.stdin.isTTY) })
  try {
    for await (const line of lines) return line // only the line break is dropped: no trimming
    return ''
  } finally {
    lines.close()
    if (process.stdin.isTTY) process.stderr.write('\n')
  }
}

async function createAdmin (config: Config, [username, email, ...extra]: string[]): Promise<void> {
  if (!username || !email || extra.length > 0) throw new CliError(USAGE)
  const password = await readPassword()
  const problems = signupProblems({ username, email, password })
  if (problems) {
    throw new CliError('The account breaks the sign-up rules:\n' + Object.entries(problems).map(([field, message]) => `  ${field}: ${message}`).join('\n'))
  }
  const passwords = createPasswordManager({ cost: config.argon2, concurrency: 1 })
  const passwordHash = await passwords.hash(password)
  await withUsers(config, async (users) => {
    try {
      const created = await users.create({ username, email, passwordHash, role: 'ROLE_ADMIN' })
      process.stdout.write(`Created administrator ${created.username} <${created.email}> (id ${created.id}) with ROLE_ADMIN.\n`)
      event('user_created', { userId: created.id, role: 'ROLE_ADMIN' })
    } catch (error) {
      if (!(error instanceof DuplicateUserError)) throw error
      throw new CliError('Not created:\n' + Object.entries(duplicateFields(error.fields)).map(([field, message]) => `  ${field}: ${message}`).join('\n'))
    }
  })
}

/** The deployment step of MIGRATIONS=off: the same locked migration the service runs at start. */
async function migrate (config: Config, extra: string[]): Promise<void> {
  if (extra.length > 0) throw new CliError(USAGE)
  const url = config.databaseMigrationUrl ?? config.databaseUrl
  if (!url) throw new CliError('No DATABASE_URL (or DATABASE_MIGRATION_URL): set it to the PostgreSQL database to migrate.')
  let applied: string[]
  try {
    applied = await migratePostgresDatabase(url)
  } catch (error) {
    throw new CliError(`Migrations failed: ${describeFailure(error)}`)
  }
  const head = `the database is at head (${migrationTags().length} migrations)`
  process.stdout.write(applied.length === 0 ? `Nothing to apply: ${head}.\n` : `Applied ${applied.join(', ')}: ${head}.\n`)
}

async function hashBenchmark (config: Config): Promise<void> {
  const options = argon2Options(config.argon2)
  await argon2.hash('warm-up-Password1', options)
  const runs: number[] = []
  for (let i = 0; i < 5; i++) {
    const start = process.hrtime.bigint()
    await argon2.hash(`benchmark-Password${i}`, options)
    runs.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  const median = runs.sort((a, b) => a - b)[2]
  const perCore = 1000 / median
  const { memoryCost, timeCost, parallelism } = config.argon2
  process.stdout.write(`argon2id m=${memoryCost} KiB, t=${timeCost}, p=${parallelism}: one hash takes ${median.toFixed(1)} ms (median of 5)\n` +
    `about ${perCore.toFixed(1)} logins/s per core; ${(perCore * Math.min(config.hashConcurrency, availableParallelism())).toFixed(1)} logins/s for this instance ` +
    `(HASH_CONCURRENCY=${config.hashConcurrency}, ${availableParallelism()} cores)\n`)
  if (median > 1000) process.stderr.write('Warning: one hash takes over 1 s; logins will be slow and easy to saturate. Lower ARGON2_ITERATIONS or ARGON2_MEMORY_KIB (not below the OWASP minimum in production).\n')
}

async function main (argv: string[]): Promise<void> {
  const [command, ...args] = argv
  // Before the configuration: the first key is generated while JWT_PRIVATE_KEY is still unset.
  if (command === 'generate-key') {
    const [algorithm, ...extra] = args
    if ((algorithm !== 'EdDSA' && algorithm !== 'ES256') || extra.length > 0) throw new CliError(`generate-key takes EdDSA or ES256\n${USAGE}`)
    process.stdout.write(generatePrivateKeyPem(algorithm))
    return
  }
  let config: Config
  try {
    config = loadConfig(process.env)
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.message)
    throw error
  }
  if (command === 'migrate') return migrate(config, args)
  if (command === 'set-role') return setRole(config, args)
  if (command === 'create-admin') return createAdmin(config, args)
  if (command === 'hash-benchmark' && args.length === 0) return hashBenchmark(config)
  if (command === 'help' || command === '--help') {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  throw new CliError(command === undefined ? USAGE : `Unknown command or arguments: ${argv.join(' ')}\n${USAGE}`)
}

try {
  await main(process.argv.slice(2))
} catch (error) {
  process.stderr.write(`${error instanceof CliError ? error.message : `Unexpected error: ${describeFailure(error)}`}\n`)
  process.exitCode = 1
}
