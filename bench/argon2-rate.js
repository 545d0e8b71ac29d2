// The limit for POST /auth/login and POST /auth/signup: raw argon2id verifies (or hashes) per
// second with the service's cost, `concurrency` jobs in flight, for `seconds`. run.js starts it
// pinned to the service's core with the service's UV_THREADPOOL_SIZE, so the only difference
// from the service is everything around the hash.
// Usage: node bench/argon2-rate.js '{"mode":"verify","concurrency":1,"seconds":10}'
import { performance } from 'node:perf_hooks'
import argon2 from 'argon2'

const { mode = 'verify', concurrency = 1, seconds = 10, warmupSeconds = 1, cost = { memoryCost: 19456, timeCost: 2, parallelism: 1 } } = JSON.parse(process.argv[2] ?? '{}')
const options = { type: argon2.argon2id, ...cost }
const password = 'Secreto123'
const stored = await argon2.hash(password, options)
const job = mode === 'hash' ? () => argon2.hash(password, options) : () => argon2.verify(stored, password)

async function run (forMs) {
  let done = 0
  const end = performance.now() + forMs
  const worker = async () => {
    while (performance.now() < end) {
      await job()
      done++
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  return { done, seconds: (performance.now() - started) / 1000 }
}

await run(warmupSeconds * 1000)
// CPU of every thread of this process (getrusage), so the CPU cost of one operation can be compared too.
const cpuBefore = process.cpuUsage()
const { done, seconds: elapsed } = await run(seconds * 1000)
const cpu = process.cpuUsage(cpuBefore)
process.stdout.write(JSON.stringify({ mode, concurrency, operations: done, seconds: elapsed, perSecond: done / elapsed, cpuMicrosPerOperation: (cpu.user + cpu.system) / done, threadpool: process.env.UV_THREADPOOL_SIZE ?? '4 (default)' }) + '\n')
