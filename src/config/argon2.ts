import { totalmem } from 'node:os'
import { ConfigError } from './config-error.js'

/** OWASP's minimum argon2id cost; production refuses anything below it. */
export const ARGON2_MINIMUM = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

/** argon2's own upper bound on memory (KiB) and iterations. */
export const ARGON2_MAXIMUM = 2 ** 32 - 1

export interface Argon2Cost { readonly memoryCost: number, readonly timeCost: number, readonly parallelism: number }

/** The memory this process may use: its cgroup's limit where one is set, else the machine's. */
function memoryLimit (): number {
  const constrained = process.constrainedMemory?.() ?? 0
  return constrained > 0 && constrained < totalmem() ? constrained : totalmem()
}

/**
 * Refuses, in one line, a cost argon2 cannot run here. argon2 checks a cost only when it hashes,
 * and the dummy hash that unknown e-mails are checked against is made without hashing
 * (src/users/password-manager.ts): such a cost would answer every sign-up 500, and an unknown
 * e-mail's login 500 where a known one's gets 401.
 */
export function checkArgon2Cost (cost: Argon2Cost, hashConcurrency: number, production: boolean, limitBytes = memoryLimit()): void {
  if (cost.memoryCost < 8 * cost.parallelism) {
    throw new ConfigError('ARGON2_MEMORY_KIB', `must be at least ${8 * cost.parallelism} with ARGON2_PARALLELISM ${cost.parallelism} (argon2 needs 8 KiB a lane)`)
  }
  const most = Math.floor(limitBytes / 1024 / hashConcurrency)
  if (cost.memoryCost > most) {
    throw new ConfigError('ARGON2_MEMORY_KIB', `must be at most ${most} here: ${hashConcurrency} hashes at once (HASH_CONCURRENCY) must fit in this process's ${(limitBytes / 2 ** 30).toFixed(1)} GiB of memory`)
  }
  if (!production) return
  const weak = ([['ARGON2_MEMORY_KIB', 'memoryCost'], ['ARGON2_ITERATIONS', 'timeCost'], ['ARGON2_PARALLELISM', 'parallelism']] as const)
    .find(([, key]) => cost[key] < ARGON2_MINIMUM[key])
  if (weak) throw new ConfigError(weak[0], `must be at least ${ARGON2_MINIMUM[weak[1]]} in production (OWASP minimum for argon2id)`)
}
