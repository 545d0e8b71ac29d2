import type { Config } from '../config.js'
import type { AppDatabase } from './client.js'
import { users } from './schema.js'

/** The two development accounts of CONTRACT §2; never called in production. */
export async function seedDevelopmentAccounts (db: AppDatabase, seed: Config['seed'], hash: (password: string) => Promise<string>): Promise<void> {
  const [adminHash, userHash] = await Promise.all([hash(seed.admin.password), hash(seed.user.password)])
  await db.insert(users).values([
    { username: 'admin', email: seed.admin.email.toLowerCase(), passwordHash: adminHash, role: 'ROLE_ADMIN' },
    { username: 'user', email: seed.user.email.toLowerCase(), passwordHash: userHash, role: 'ROLE_USER' }
  ]).onConflictDoNothing()
}
