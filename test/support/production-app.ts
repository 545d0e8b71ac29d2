import { isDeepStrictEqual } from 'node:util'
import type { Test } from 'tap'
import type { App } from '../../src/app.js'
import { buildCheckedApp } from '../openapi/conformance.js'
import { loadConfig } from '../../src/config/index.js'
import { loggerOptions } from '../../src/telemetry/logger.js'
import { buildManagementApp } from '../../src/management/management-app.js'
import { captureLog, errorBodies } from '../helper.js'
import { TEST_SECRET } from '../server-process.js'

/**
 * The service in the production profile over `databaseUrl`, in this process: production
 * argon2 cost and logger (captured), limits off so that loops from one address are not limited.
 */
export async function productionApp (t: Test, databaseUrl: string, env: Record<string, string> = {}) {
  const config = loadConfig({ APP_PROFILE: 'production', DATABASE_URL: databaseUrl, JWT_SECRET: TEST_SECRET, RATE_LIMITS: 'off', LOG_LEVEL: 'info', MANAGEMENT_PORT: 'off', ...env })
  const log = captureLog()
  const app = await buildCheckedApp(config, { logger: { ...loggerOptions(config) as object, stream: log.stream } })
  t.teardown(() => app.close())
  const management = await buildManagementApp({ api: app, isShuttingDown: () => false })
  t.teardown(() => management.close())
  // Readiness also asks that the API listener listens.
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, management, log }
}

export interface Attempt { username: string, status: number, startedAt: number, ms: number, body: string, retryAfter: unknown }

/** A 503's body as the wire carries it. */
export const UNAVAILABLE = JSON.stringify(errorBodies.unavailable)

/** `workers` sign-up loops against `app`, each with a name never used before, until `stop()`. */
/** A 201's body is the account the loop sent, with its new id. */
function signedUp (attempt: Attempt): boolean {
  const body = JSON.parse(attempt.body) as { id?: unknown }
  return Number.isInteger(body.id) && isDeepStrictEqual(body, { id: body.id, username: attempt.username, email: `${attempt.username}@example.com` })
}

export function signupLoops (app: App, prefix: string, workers = 4) {
  const attempts: Attempt[] = []
  let running = true
  let counter = 0
  async function loop () {
    while (running) {
      const username = `${prefix}${counter++}`
      const startedAt = Date.now()
      const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })
      attempts.push({ username, status: response.statusCode, startedAt, ms: Date.now() - startedAt, body: response.body, retryAfter: response.headers['retry-after'] })
    }
  }
  const loops = Array.from({ length: workers }, loop)
  return {
    attempts,
    /** The first 201 of a sign-up that started at or after `since`, polled until `timeoutMs` passes. */
    async firstSuccessAfter (since: number, timeoutMs: number): Promise<Attempt | undefined> {
      while (Date.now() < since + timeoutMs) {
        const found = attempts.find((a) => a.status === 201 && a.startedAt >= since)
        if (found) return found
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      return undefined
    },
    async stop (): Promise<Attempt[]> {
      running = false
      await Promise.all(loops)
      return attempts
    },
    /** Answers other than the contract's 201 (the account sent, with an id) and its 503 with Retry-After: 1. */
    strays: () => attempts.filter((a) => a.status === 201 ? !signedUp(a) : !(a.status === 503 && a.body === UNAVAILABLE && a.retryAfter === '1'))
  }
}
