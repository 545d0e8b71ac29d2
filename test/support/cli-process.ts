import { spawn } from 'node:child_process'
import { root } from '../server-process.js'

export interface CliRun { code: number | null, stdout: string, stderr: string }

/** `npm run cli -- ...args` without npm: a child process with only PATH and the given environment. */
export function runCli (args: string[], env: Record<string, string> = {}, input = ''): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], { cwd: root, env: { PATH: process.env.PATH ?? '', ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => { stdout += chunk })
    child.stderr.on('data', (chunk) => { stderr += chunk })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(input)
  })
}
