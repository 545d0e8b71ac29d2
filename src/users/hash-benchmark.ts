import { availableParallelism } from 'node:os'
import argon2 from 'argon2'
import type { Config } from '../config/index.js'
import { argon2Options } from './password-manager.js'

/**
 * `npm run cli -- hash-benchmark`: the time of one hash with the configured ARGON2_*, and the
 * logins a second it allows; a warning when a hash takes over a second.
 */
export async function hashBenchmark (config: Pick<Config, 'argon2' | 'hashConcurrency'>): Promise<{ report: string, warning?: string }> {
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
  const report = `argon2id m=${memoryCost} KiB, t=${timeCost}, p=${parallelism}: one hash takes ${median.toFixed(1)} ms (median of 5)\n` +
    `about ${perCore.toFixed(1)} logins/s per core; ${(perCore * Math.min(config.hashConcurrency, availableParallelism())).toFixed(1)} logins/s for this instance ` +
    `(HASH_CONCURRENCY=${config.hashConcurrency}, ${availableParallelism()} cores)\n`
  if (median <= 1000) return { report }
  return { report, warning: 'Warning: one hash takes over 1 s; logins will be slow and easy to saturate. Lower ARGON2_ITERATIONS or ARGON2_MEMORY_KIB (not below the OWASP minimum in production).\n' }
}
