import { connect } from 'node:net'
import type { Test } from 'tap'
import { TEST_SECRET, freePort } from '../server-process.js'
import { findProgram, get, spawnLogged, until, type Process } from './processes.js'
import { serviceNodeArgs, serviceStartEnv } from '../../bench/lib.js'

/** A redis-server of the test's own, without persistence, that can be stopped and started again. */
export async function startRedis (t: Test) {
  const program = findProgram('redis-server')!
  const port = await freePort()
  let current: Process | undefined
  const redis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start () {
      current = spawnLogged(t, program, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {})
      await until('redis-server listening', async () => (await redisCommand(port, 'PING')).includes('PONG'), 10_000)
    },
    async stop () {
      current!.child.kill('SIGTERM')
      await current!.exited
    },
    /** How many client connections (the instances') Redis has, not counting this question's own. */
    async clients (): Promise<number> {
      return (await redisCommand(port, 'CLIENT LIST')).split('\n').filter((line) => line.includes('cmd=') && !line.includes('cmd=client')).length
    }
  }
  await redis.start()
  return redis
}

/** One inline command over a fresh connection (no client library needed for PING and CLIENT LIST). */
async function redisCommand (port: number, command: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    socket.setTimeout(1000, () => socket.destroy())
    socket.on('connect', () => socket.write(`${command}\r\nQUIT\r\n`))
    socket.on('data', (chunk) => { answer += chunk })
    socket.on('close', () => resolve(answer))
    socket.on('error', () => resolve(''))
  })
}

export interface Instance { readonly name: string, readonly host: string, process: Process }

/**
 * `count` production instances, each on its own loopback address with the same two ports (as
 * on separate hosts), over one database and one Redis, trusting only the balancer's address.
 */
export async function startInstances (t: Test, count: number, shared: { server: string, databaseUrl: string, redisUrl: string, trustProxy: string }) {
  const [apiPort, managementPort] = [await freePort(), await freePort()]
  const env = (host: string): Record<string, string> => ({
    APP_PROFILE: 'production',
    HOST: host,
    PORT: String(apiPort),
    MANAGEMENT_HOST: host,
    MANAGEMENT_PORT: String(managementPort),
    DATABASE_URL: shared.databaseUrl,
    DB_POOL_MAX: '4',
    JWT_SECRET: TEST_SECRET,
    REDIS_URL: shared.redisUrl,
    TRUST_PROXY: shared.trustProxy,
    // What `npm start` sets (thread pool, malloc), read from package.json as the bench reads it.
    ...serviceStartEnv()
  })
  const instances: Instance[] = Array.from({ length: count }, (_, i) => {
    const host = `127.0.1.${i + 1}`
    return { name: `app${i + 1}`, host, process: spawnLogged(t, process.execPath, [...serviceNodeArgs(), shared.server], env(host)) }
  })
  const ready = (instance: Instance) => until(`${instance.name} ready`, async () => {
    if (instance.process.child.exitCode !== null) throw new Error(`${instance.name} exited:\n${instance.process.stderr()}`)
    return (await get(instance.host, managementPort, '/health/ready'))?.status === 200
  }, 90_000)
  await Promise.all(instances.map(ready))
  return {
    apiPort,
    managementPort,
    instances,
    /** A new process for `instance`, same address, ports and settings. */
    async restart (instance: Instance) {
      instance.process = spawnLogged(t, process.execPath, [...serviceNodeArgs(), shared.server], env(instance.host))
      await ready(instance)
    }
  }
}

/** HAProxy with deploy/haproxy.cfg, in the foreground (-db), as a child of the test. */
export async function startHaproxy (t: Test, instances: readonly Instance[], ports: { apiPort: number, managementPort: number }) {
  const [port, statsPort] = [await freePort(), await freePort()]
  const env: Record<string, string> = {
    UMS_LB_BIND: `127.0.0.1:${port}`,
    UMS_LB_STATS_BIND: `127.0.0.1:${statsPort}`,
    UMS_API_PORT: String(ports.apiPort),
    UMS_MANAGEMENT_PORT: String(ports.managementPort)
  }
  instances.forEach((instance, i) => { env[`UMS_APP${i + 1}_ADDR`] = instance.host })
  const haproxy = spawnLogged(t, findProgram('haproxy')!, ['-f', 'deploy/haproxy.cfg', '-db'], env)
  const balancer = {
    port,
    output: haproxy.output,
    /** Each server's state as HAProxy sees it: "UP", "DOWN", "UP 1/2", "no check"... */
    async states (): Promise<Record<string, string>> {
      const answer = await get('127.0.0.1', statsPort, '/stats;csv')
      if (answer?.status !== 200) throw new Error(`HAProxy stats did not answer:\n${haproxy.output()}`)
      const [header, ...rows] = answer.body.replace(/^# /, '').trim().split('\n').map((line) => line.split(','))
      const [name, server, status] = ['pxname', 'svname', 'status'].map((column) => header.indexOf(column))
      return Object.fromEntries(rows.filter((row) => row[name] === 'instances').map((row) => [row[server], row[status]]))
    },
    /** Waits until HAProxy reports `server` as `state`; the milliseconds it took. */
    waitState (server: string, state: 'UP' | 'DOWN', timeoutMs = 30_000) {
      return until(`HAProxy sees ${server} ${state}`, async () => (await balancer.states())[server] === state, timeoutMs)
    }
  }
  await until('HAProxy stats answering', async () => (await get('127.0.0.1', statsPort, '/stats;csv'))?.status === 200, 10_000)
    .catch((error) => { throw new Error(`${error.message}\n${haproxy.output()}`) })
  await Promise.all(instances.map((instance) => balancer.waitState(instance.name, 'UP')))
  return balancer
}

export type Balancer = Awaited<ReturnType<typeof startHaproxy>>

/** Security events of one kind that the current processes logged, with the instance that logged each. */
export function securityEvents (instances: readonly Instance[], event: string) {
  return instances.flatMap((instance) => instance.process.stdout().split('\n').flatMap((line) => {
    try {
      const parsed = JSON.parse(line)
      return parsed.event === event ? [{ instance: instance.name, ...parsed }] : []
    } catch {
      return []
    }
  }))
}
