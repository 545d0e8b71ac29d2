import type { Config } from '../config/index.js'
import type { AppDatabase } from '../db/database.js'
import { users } from '../db/schema.js'
import { newUserRow } from './users-repository.js'

/** The two development accounts of CONTRACT §2; never called in production. */
export async function seedDevelopmentAccounts (db: AppDatabase, seed: Config['seed'], hash: (password: string) => Promise<string>): Promise<void> {
  const [adminHash, userHash] = await Promise.all([hash(seed.admin.password), hash(seed.user.password)])
  await db.insert(users).values([
    newUserRow({ username: 'admin', email: seed.admin.email, passwordHash: adminHash, role: 'ROLE_ADMIN' }),
    newUserRow({ username: 'user', email: seed.user.email, passwordHash: userHash, role: 'ROLE_USER' })
  ]).onConflictDoNothing()
}
