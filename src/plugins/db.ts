import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { connectPostgres, type Database } from '../db/client.js'
import { migratePostgresDatabase } from '../db/migrate.js'
import { openMigratedPglite } from '../db/snapshot.js'

declare module 'fastify' {
  interface FastifyInstance {
    database: Database
  }
}

export interface DbPluginOptions {
  readonly config: Config
  /** A database opened (and migrated) by the caller, who also closes it: tests, the CLI. */
  readonly database?: Database
}

/** Opens the configured database, applies pending migrations, and closes it with the app. */
export async function openDatabase (config: Config): Promise<Database> {
  // From a snapshot of the migrated schema, rebuilt whenever drizzle/ changes (src/db/snapshot.ts).
  if (config.profile === 'development') return (await openMigratedPglite()).database
  // loadConfig guarantees a URL in production.
  const url = config.databaseUrl!
  await migratePostgresDatabase(url)
  return connectPostgres({ url, poolMax: config.dbPoolMax })
}

export default fp<DbPluginOptions>(async function dbPlugin (app, { config, database }) {
  const opened = database ?? await openDatabase(config)
  app.decorate('database', opened)
  if (!database) app.addHook('onClose', () => opened.close())
}, { fastify: '5.x', name: 'db' })
