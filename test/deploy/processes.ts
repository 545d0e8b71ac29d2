import { spawn } from 'node:child_process'
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { root, type Exit } from '../server-process.js'

/** Where Debian puts a program; /usr/sbin (haproxy) is not on every user's PATH. */
export function findProgram (name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin']
  for (const dir of dirs.filter(Boolean)) {
    try {
      accessSync(join(dir, name), constants.X_OK)
      return join(dir, name)
    } catch {}
  }
  return undefined
}

/** Polls `check` every `everyMs` until it holds (an error ends the wait); returns the milliseconds it took. */
export async function until (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000, everyMs = 100): Promise<number> {
  const started = Date.now()
  while (!await check()) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`)
    await sleep(everyMs)
  }
  return Date.now() - started
}

/** GET on a plain address and port: status and body, or undefined when nothing answered. */
export function get (host: string, port: number, path: string): Promise<{ status: number, body: string } | undefined> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, agent: false, timeout: 2000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => { body += chunk })
      res.on('end', () => resolve({ status: res.statusCode!, body }))
      res.on('error', () => resolve(undefined))
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(undefined))
    req.end()
  })
}

/** A child process of the test, killed at teardown if still running; its output kept. */
export function spawnLogged (t: Test, command: string, args: string[], env: Record<string, string>) {
  // Should the test process be killed (tap's timeout), its servers die with it instead of
  // holding ports and CPU: setpriv (util-linux) asks the kernel for that, then runs `command`.
  const setpriv = findProgram('setpriv')
  const [program, argv] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', command, ...args]] : [command, args]
  const child = spawn(program, argv, { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let [stdout, stderr] = ['', '']
  child.stdout!.on('data', (chunk) => { stdout += chunk })
  child.stderr!.on('data', (chunk) => { stderr += chunk })
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  return { child, exited, stdout: () => stdout, stderr: () => stderr, output: () => stdout + stderr }
}

export type Process = ReturnType<typeof spawnLogged>

/**
 * The service's sources as plain JavaScript, beside links to the repository's node_modules and
 * drizzle folders: what `npm run build` gives, without its type check. Node starts it in about
 * half the time `--import tsx` takes, which matters for the four restarts on a busy machine.
 */
export async function transpileService (t: Test): Promise<string> {
  // Loaded here, not at the top: a skipped run does not pay for the compiler.
  const { default: ts } = await import('typescript')
  const out = mkdtempSync(join(tmpdir(), 'ums-lb-'))
  t.teardown(() => rmSync(out, { recursive: true, force: true }))
  const files = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))
  for (const file of files) {
    const target = join(out, 'src', file.replace(/\.ts$/, '.js'))
    mkdirSync(dirname(target), { recursive: true })
    const { outputText } = ts.transpileModule(readFileSync(join(root, 'src', file), 'utf8'), { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } })
    writeFileSync(target, outputText)
  }
  writeFileSync(join(out, 'package.json'), '{ "type": "module" }\n')
  symlinkSync(join(root, 'node_modules'), join(out, 'node_modules'))
  symlinkSync(join(root, 'drizzle'), join(out, 'drizzle'))
  return join(out, 'src', 'server.js')
}

