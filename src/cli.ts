import { ConfigError, loadConfig, type Config } from './config/index.js'
import { generatePrivateKeyPem } from './config/signing-keys.js'
import { describeFailure } from './telemetry/error-description.js'
import { CliError, UsageError } from './users/command-errors.js'

// Each command loads what it needs when it runs: generate-key and the usage start at once,
// without the database drivers, argon2 or the app.

const USAGE = `Usage: npm run cli -- <command>   (node dist/cli.js <command> where only the build is installed)
  migrate                                 apply pending migrations (DATABASE_MIGRATION_URL, else
                                          DATABASE_URL) and print what was applied
  set-role <email> ROLE_USER|ROLE_ADMIN   change the role of an account
  create-admin <username> <email>         create an administrator; the password comes from
                                          ADMIN_PASSWORD or standard input, never the arguments
  hash-benchmark                          time one argon2id hash with the configured ARGON2_*
  generate-key EdDSA|ES256                print a new private key (PKCS#8 PEM) for JWT_PRIVATE_KEY
  help, --help, -h                        print this`

/** The deployment step of MIGRATIONS=off: the same locked migration the service runs at start. */
async function migrate (config: Config, extra: string[]): Promise<void> {
  if (extra.length > 0) throw new UsageError('migrate takes no argument')
  // DATABASE_MIGRATION_URL, else DATABASE_URL (src/config/index.ts).
  const url = config.databaseMigrationUrl
  if (!url) throw new CliError('No DATABASE_URL (or DATABASE_MIGRATION_URL): set it to the PostgreSQL database to migrate.')
  const { migratePostgresDatabase, migrationTags } = await import('./db/migrate.js')
  let migrated: Awaited<ReturnType<typeof migratePostgresDatabase>>
  try {
    migrated = await migratePostgresDatabase(url, { onWaiting: (message) => process.stderr.write(`${message}\n`) })
  } catch (error) {
    throw new CliError(`Migrations failed: ${describeFailure(error)}`)
  }
  const known = migrationTags().length
  const head = migrated.recorded > known
    ? `the database holds ${migrated.recorded} migrations, this release knows ${known}: a newer release migrated it`
    : `the database is at head (${known} migrations)`
  process.stdout.write(migrated.applied.length === 0 ? `Nothing to apply: ${head}.\n` : `Applied ${migrated.applied.join(', ')}: ${head}.\n`)
}

/**
 * The account commands' own variables, beside the service's configuration (docs/configuration.md):
 * empty counts as unset there too (`ADMIN_PASSWORD= cli create-admin …` reads standard input).
 */
const commandContext = () => ({ sudoUser: process.env.SUDO_USER || undefined, adminPassword: process.env.ADMIN_PASSWORD || undefined })

/** The commands that need the configuration, each loading what it needs when it runs. */
const commands: Record<string, (config: Config, args: string[]) => Promise<void>> = {
  migrate,
  'set-role': async (config, args) => (await import('./users/account-commands.js')).setRole(config, args, commandContext()),
  'create-admin': async (config, args) => (await import('./users/account-commands.js')).createAdmin(config, args, commandContext()),
  'hash-benchmark': async (config, args) => {
    if (args.length > 0) throw new UsageError('hash-benchmark takes no argument')
    const { report, warning } = await (await import('./users/hash-benchmark.js')).hashBenchmark(config)
    process.stdout.write(report)
    if (warning) process.stderr.write(warning)
  }
}

async function main (argv: string[]): Promise<void> {
  const [command, ...args] = argv
  // Before the configuration: the first key is generated while JWT_PRIVATE_KEY is still unset,
  // and the usage helps most where the configuration is still wrong.
  if (command === 'generate-key') {
    const [algorithm, ...extra] = args
    if ((algorithm !== 'EdDSA' && algorithm !== 'ES256') || extra.length > 0) throw new CliError(`generate-key takes EdDSA or ES256\n${USAGE}`)
    process.stdout.write(generatePrivateKeyPem(algorithm))
    return
  }
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  if (command === undefined || !Object.hasOwn(commands, command)) throw new CliError(command === undefined ? USAGE : `Unknown command: ${command}\n${USAGE}`)
  let config: Config
  try {
    config = loadConfig(process.env)
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.message)
    throw error
  }
  await commands[command](config, args)
}

try {
  await main(process.argv.slice(2))
} catch (error) {
  const message = error instanceof UsageError ? `${error.message}\n${USAGE}` : error instanceof CliError ? error.message : `Unexpected error: ${describeFailure(error)}`
  process.stderr.write(`${message}\n`)
  process.exitCode = 1
}
