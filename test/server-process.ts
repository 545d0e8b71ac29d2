import { spawn, type ChildProcess } from 'node:child_process'
import { request } from 'node:http'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'

/** The repository root, where `node --import tsx src/server.ts` runs. */
export const root = fileURLToPath(new URL('..', import.meta.url))

/** A port nobody listens on right now (the kernel's pick, released at once). */
export async function freePort (host = '127.0.0.1'): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Whether `port` can be bound on `host` now. */
export async function portIsFree (port: number, host = '127.0.0.1'): Promise<boolean> {
  const server = createServer()
  return new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })
}

export interface Exit { code: number | null, signal: NodeJS.Signals | null }

export interface ServerProcess {
  readonly child: ChildProcess
  readonly port: number
  readonly managementPort: number | undefined
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<Exit>
}

/**
 * `node --import tsx src/server.ts` with exactly `env` (plus PATH and HOME): nothing of the
 * test runner's environment leaks into the configuration. Killed at teardown if still running.
 */
export function spawnServer (t: Test, env: Record<string, string>, nodeArgs: string[] = []): ServerProcess {
  // As the test processes run (.taprc): PGlite's WebAssembly without V8's optimizing tier-up.
  const child = spawn(process.execPath, ['--liftoff-only', ...nodeArgs, '--import', 'tsx', 'src/server.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let err = ''
  child.stdout!.on('data', (chunk) => { out += chunk })
  child.stderr!.on('data', (chunk) => { err += chunk })
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  return {
    child,
    port: Number(env.PORT ?? 8080),
    managementPort: env.MANAGEMENT_PORT === 'off' ? undefined : Number(env.MANAGEMENT_PORT ?? 9090),
    stdout: () => out,
    stderr: () => err,
    exited
  }
}

/** node options that make the process list, as it exits, every module it loaded (test/support/module-log.mjs). */
export const MODULE_LOG = ['--import', new URL('./support/module-log.mjs', import.meta.url).href]

/** The modules a process started with MODULE_LOG had loaded when it exited. */
export function loadedModules (server: ServerProcess): string[] {
  const line = server.stderr().split('\n').find((text) => text.startsWith('MODULES '))
  if (!line) throw new Error(`no MODULES line:\n${server.stderr()}`)
  return JSON.parse(line.slice('MODULES '.length)) as string[]
}

export interface HttpAnswer { status: number, headers: Record<string, string | string[] | undefined>, body: string, json: () => any }

/** One HTTP request over a fresh connection; a JSON body is sent with any method, GET included. */
export function http (port: number, method: string, path: string, options: { body?: unknown, headers?: Record<string, string>, timeoutMs?: number } = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    const req = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      agent: false,
      timeout: options.timeoutMs ?? 15_000,
      headers: { ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...options.headers }
    }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, json: () => JSON.parse(body) }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)))
    req.on('error', reject)
    req.end(payload)
  })
}

/** Polls `GET path` on `port` until it answers `status`, the process exits, or `timeoutMs` passes. */
export async function waitFor (server: ServerProcess, port: number, path: string, status = 200, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let exited = false
  server.exited.then(() => { exited = true }, () => {})
  for (;;) {
    if (exited) throw new Error(`server exited before ${path} answered ${status}:\n${server.stderr()}\n${server.stdout()}`)
    try {
      if ((await http(port, 'GET', path, { timeoutMs: 1000 })).status === status) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`${path} did not answer ${status} within ${timeoutMs} ms:\n${server.stderr()}\n${server.stdout()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** Waits until the management listener reports ready (the API listens, the database is migrated). */
export function waitReady (server: ServerProcess, timeoutMs = 90_000): Promise<void> {
  if (server.managementPort === undefined) throw new Error('no management listener to ask')
  return waitFor(server, server.managementPort, '/health/ready', 200, timeoutMs)
}

/** A production secret for tests: long, random-looking, not a placeholder. */
export const TEST_SECRET = 'test-secret-9f8e7d6c5b4a39281706f5e4d3c2b1a0'
