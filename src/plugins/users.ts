import fp from 'fastify-plugin'
import type { Config } from '../config/index.js'
import { seedDevelopmentAccounts } from '../users/seed.js'
import { createPasswordManager, type PasswordManager } from '../users/password-manager.js'
import { createUsersRepository, type UsersRepository } from '../users/users-repository.js'

declare module 'fastify' {
  interface FastifyInstance {
    usersRepository: UsersRepository
    passwords: PasswordManager
  }
}

export interface UsersPluginOptions {
  readonly config: Config
  /** Insert the development accounts (development profile, fresh database). */
  readonly seed: boolean
  readonly onHashTiming?: (operation: 'hash' | 'verify', seconds: number) => void
}

/** The users repository and the password manager, over the app's database. */
export default fp<UsersPluginOptions>(async function usersPlugin (app, { config, seed, onHashTiming }) {
  const passwords = createPasswordManager({ cost: config.argon2, concurrency: config.hashConcurrency, onTiming: onHashTiming })
  app.decorate('passwords', passwords)
  app.decorate('usersRepository', createUsersRepository(app.database))
  if (seed) {
    // The two hashes run on the thread pool while the rest of the app registers and compiles its
    // schemas on the main thread, so a development start answers sooner; the app is not ready,
    // and so answers nothing, until both accounts are in. A failure fails `ready()` and the start.
    const seeding = seedDevelopmentAccounts(app.database.db, config.seed, passwords.hash)
    seeding.catch(() => {}) // handled by the onReady hook; not an unhandled rejection meanwhile
    app.addHook('onReady', () => seeding)
  }
}, { fastify: '5.x', name: 'users', dependencies: ['db'] })
