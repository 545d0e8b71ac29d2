import fp from 'fastify-plugin'
import type { Config } from '../config/index.js'
import type { Database } from '../db/database.js'
import { openDatabase } from '../db/open-database.js'

declare module 'fastify' {
  interface FastifyInstance {
    database: Database
  }
}

export interface DbPluginOptions {
  readonly config: Config
  /** A database opened by the caller, who also closes it: server.ts, tests, the CLI. */
  readonly database?: Database
}

/** The configured database (src/db/open-database.ts); closed with the app when the app opened it. */
export default fp<DbPluginOptions>(async function dbPlugin (app, { config, database }) {
  const opened = database ?? await openDatabase(config)
  app.decorate('database', opened)
  if (!database) app.addHook('onClose', () => opened.close())
}, { fastify: '5.x', name: 'db' })
