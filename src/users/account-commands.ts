import { userInfo } from 'node:os'
import { createInterface } from 'node:readline/promises'
import { Writable } from 'node:stream'
import { Value } from '@sinclair/typebox/value'
import type { Config } from '../config/index.js'
import { NoPersistentDatabaseError, openDatabase } from '../db/open-database.js'
import { behindMigrations } from '../db/pg-errors.js'
import { DuplicateUserError } from '../http/errors.js'
import { duplicateFields, fieldErrors } from '../http/error-bodies.js'
import { compileBodyValidator } from '../http/validation.js'
import { Role } from '../schemas/common.js'
import { SignupBody } from '../schemas/users.js'
import { describeFailure } from '../telemetry/error-description.js'
import { createCommandLogger } from '../telemetry/logger.js'
import { logSecurityEvent, type SecurityEvent, type SecurityEventDetails } from '../telemetry/security-events.js'
import { createPasswordManager } from './password-manager.js'
import { createUsersRepository, type UsersRepository } from './users-repository.js'
import { CliError, UsageError } from './command-errors.js'

// The CLI's commands that change accounts directly (SPEC.md allows it; CONTRACT §2): each
// prints what it changed and writes its security event as a JSON line to standard output.


/** What the CLI's own environment says of the run (cli.ts reads it: only the entry points read process.env). */
export interface CommandContext {
  /** Who ran the command through sudo (SUDO_USER), for the security events' `actor`. */
  readonly sudoUser?: string
  /** create-admin's password (ADMIN_PASSWORD), read from standard input when unset. */
  readonly adminPassword?: string
}

// Who ran the command, for the audit trail of the security events.
function actor (context: CommandContext): string {
  try {
    return context.sudoUser ?? userInfo().username
  } catch {
    return 'unknown'
  }
}

// As the service writes its own, so one query finds both (level, msg).
const event = (config: Config, context: CommandContext, name: SecurityEvent, details: SecurityEventDetails) =>
  logSecurityEvent(createCommandLogger(config), name, { ...details, source: 'cli', actor: actor(context) })

/** The configured PostgreSQL database (migrated to head first unless MIGRATIONS=off), for the length of `work`. */
async function withUsers<T> (config: Config, work: (users: UsersRepository) => Promise<T>): Promise<T> {
  let database
  try {
    // With MIGRATIONS=on-start, the same locked migration the service runs at start, so the CLI
    // can bootstrap an empty database.
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
  } catch (error) {
    // MIGRATIONS=off, as on the instances, against a database nobody migrated yet.
    if (behindMigrations(error)) throw new CliError('The database is behind this release\'s migrations (no users table, or a column missing): run `migrate` first.')
    throw error
  } finally {
    await database.close()
  }
}

export async function setRole (config: Config, [email, role, ...extra]: string[], context: CommandContext = {}): Promise<void> {
  if (!email || !role || extra.length > 0) throw new UsageError('set-role takes an e-mail and a role')
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
    event(config, context, 'role_changed', { userId: account.id, previousRole: account.role, role })
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
async function readPassword (adminPassword: string | undefined): Promise<string> {
  if (adminPassword !== undefined) return adminPassword
  const silent = new Writable({ write (_chunk, _encoding, done) { done() } })
  if (process.stdin.isTTY) process.stderr.write('Password: ')
  const lines = createInterface({ input: process.stdin, output: silent, terminal: Boolean(process.stdin.isTTY) })
  // On a terminal readline takes Ctrl-C to itself: it ends the command, as anywhere else.
  lines.on('SIGINT', () => {
    process.stderr.write('\n')
    process.exit(130)
  })
  try {
    for await (const line of lines) return line // only the line break is dropped: no trimming
    return ''
  } finally {
    lines.close()
    if (process.stdin.isTTY) process.stderr.write('\n')
  }
}

export async function createAdmin (config: Config, [username, email, ...extra]: string[], context: CommandContext = {}): Promise<void> {
  if (!username || !email || extra.length > 0) throw new UsageError('create-admin takes a username and an e-mail')
  const password = await readPassword(context.adminPassword)
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
      event(config, context, 'user_created', { userId: created.id, role: 'ROLE_ADMIN' })
    } catch (error) {
      if (!(error instanceof DuplicateUserError)) throw error
      throw new CliError('Not created:\n' + Object.entries(duplicateFields(error.fields)).map(([field, message]) => `  ${field}: ${message}`).join('\n'))
    }
  })
}
