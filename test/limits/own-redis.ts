import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { redisIsUp } from '../helper.js'
import { freePort } from '../server-process.js'

/** Why tests that start their own Redis skip, or false when redis-server is installed. */
export const ownRedisSkip = spawnSync('redis-server', ['--version']).status === 0 ? false : 'redis-server is not installed: the Redis outage tests need one of their own'

export interface OwnRedis {
  readonly url: string
  /** SIGSTOP: the connection stays open and nothing answers. */
  pause (): void
  /** SIGCONT. */
  resume (): void
  /** SIGTERM, and wait for the exit. */
  stop (): Promise<void>
  /** A new, empty redis-server on the same port (this one keeps nothing on disk), once stopped. */
  restart (): Promise<void>
  /** A client of its own, closed at teardown. */
  client (): Redis
}

/**
 * A redis-server of the test's own on a free loopback port, without persistence, stopped at
 * teardown: the shared Redis is never paused or stopped. `args` are passed to redis-server.
 */
export async function startOwnRedis (t: Test, args: string[] = []): Promise<OwnRedis> {
  const port = await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'ums-redis-'))
  const url = `redis://127.0.0.1:${port}`
  let paused = false
  let server: { child: ChildProcess, exited: Promise<unknown> }
  const launch = async () => {
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...args], { stdio: 'ignore' })
    server = { child, exited: once(child, 'exit') }
    for (let tries = 0; !(await redisIsUp(url)); tries++) {
      if (tries > 100) throw new Error(`redis-server on port ${port} did not start`)
      await sleep(100)
    }
  }
  t.teardown(async () => {
    const { child, exited } = server
    if (child.exitCode === null && child.signalCode === null) {
      if (paused) child.kill('SIGCONT')
      child.kill('SIGTERM')
      await exited
    }
    await rm(dir, { recursive: true, force: true })
  })
  await launch()
  return {
    url,
    pause () { paused = server.child.kill('SIGSTOP') },
    resume () { paused = !server.child.kill('SIGCONT') },
    async stop () {
      server.child.kill('SIGTERM')
      await server.exited
    },
    async restart () {
      await launch()
    },
    client () {
      const redis = new Redis(url, { maxRetriesPerRequest: 0 })
      redis.on('error', () => {})
      t.teardown(() => redis.disconnect())
      return redis
    }
  }
}
