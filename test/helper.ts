import { createHmac, randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import { eq, getTableName, is, sql } from 'drizzle-orm'
import { PgTable } from 'drizzle-orm/pg-core'
import postgres from 'postgres'
import tap, { type Test } from 'tap'
import { buildApp, type App, type AppDependencies } from '../src/app.js'
import { loadConfig, type Config } from '../src/config/index.js'
import type { Database } from '../src/db/database.js'
import { openDatabase } from '../src/db/open-database.js'
import * as schema from '../src/db/schema.js'
import { users } from '../src/db/schema.js'

export type DatabaseKind = 'pglite' | 'postgres'

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (CI sets it). */
export function testDatabases (): DatabaseKind[] {
  return process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite']
}

/** Development profile, cheap argon2, quiet: what most tests run with. */
export function testConfig (env: Record<string, string> = {}): Config {
  return loadConfig({
    APP_PROFILE: 'development',
    ARGON2_MEMORY_KIB: '256',
    ARGON2_ITERATIONS: '1',
    MANAGEMENT_PORT: 'off',
    LOG_LEVEL: 'silent',
    // Other tests sign up many users from one inject address; the limit tests turn this on.
    RATE_LIMITS: 'off',
    ...env
  })
}

export interface TestDatabase { database: Database, url?: string }

/** A migrated database of its own, with no rows, gone when the test ends. */
export async function createTestDatabase (t: Test, kind: DatabaseKind): Promise<TestDatabase> {
  if (kind === 'pglite') return { database: await leasePglite(t) }
  const url = await createPostgresDatabase(t)
  const database = await openDatabase(testConfig({ DATABASE_URL: url }), { persistent: true })
  // Registered after the drop, so it runs before it (tap runs teardowns in reverse).
  t.teardown(() => database.close())
  return { database, url }
}

/**
 * PGlite databases a finished test of this process handed back, emptied: restoring the snapshot
 * costs about half a CPU-second, emptying the tables a few milliseconds, and most test files
 * build several apps one after another.
 */
const sparePglites: Database[] = []
tap.teardown(async () => { await Promise.all(sparePglites.splice(0).map((database) => database.close())) })
const tableNames = Object.values(schema).filter((value) => is(value, PgTable)).map((table) => getTableName(table as PgTable))

async function leasePglite (t: Test): Promise<Database> {
  const database = sparePglites.pop() ?? await openDatabase(testConfig())
  let closedByTest = false
  // A test that closes its database, or replaces one of its methods, keeps that to itself.
  const lease: Database = { ...database, close: async () => { closedByTest = true; await database.close() } }
  t.teardown(async () => {
    if (closedByTest) return
    try {
      await database.db.execute(sql.raw(`truncate ${tableNames.join(', ')} restart identity`))
      sparePglites.push(database)
    } catch {
      await database.close().catch(() => {})
    }
  })
  return lease
}

/** An empty PostgreSQL database named at random, dropped (with its connections) at teardown. */
export async function createPostgresDatabase (t: Test): Promise<string> {
  const adminUrl = process.env.TEST_DATABASE_URL
  if (!adminUrl) throw new Error('TEST_DATABASE_URL is not set')
  const name = `ums_test_${randomBytes(6).toString('hex')}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  t.teardown(async () => {
    const dropper = postgres(adminUrl, { max: 1, onnotice: () => {} })
    await dropper.unsafe(`drop database if exists ${name} with (force)`)
    await dropper.end()
  })
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

export interface BuildOptions extends Omit<AppDependencies, 'database'> {
  readonly env?: Record<string, string>
}

/** The API on a fresh database of `kind`, seeded with the development accounts, closed at teardown. */
export async function build (t: Test, kind: DatabaseKind, options: BuildOptions = {}): Promise<App & { testDatabase: TestDatabase }> {
  const testDatabase = await createTestDatabase(t, kind)
  const app = await buildApp(testConfig(options.env), { seed: true, ...options, database: testDatabase.database })
  t.teardown(() => app.close())
  // Every answer of every test must be one docs/openapi.json allows. (Loaded here, as ioredis is
  // below: a test file that needs neither does not pay for compiling the document's schemas.)
  const { checkAnswersAgainstDocument } = await import('./openapi/conformance.js')
  checkAnswersAgainstDocument(app)
  await app.ready()
  return Object.assign(app, { testDatabase })
}

export const seedAccounts = {
  admin: { id: 1, username: 'admin', email: 'admin@example.com', password: 'Admin1234', role: 'ROLE_ADMIN' },
  user: { id: 2, username: 'user', email: 'user@example.com', password: 'User12345', role: 'ROLE_USER' }
} as const

/** Logs in through the API and returns the bearer token. */
export async function login (app: App, email: string, password: string): Promise<string> {
  const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email, password } })
  if (response.statusCode !== 200) throw new Error(`login failed: ${response.statusCode} ${response.body}`)
  return response.json().token
}

/** A login from a client address of the test's choosing: the §9 limits count per address. */
export const loginFrom = (app: App, remoteAddress: string, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/login', payload: { email, password }, remoteAddress })

type Answer = Awaited<ReturnType<App['inject']>>

/** A sign-up's 201 whose body is exactly `{ id, username, email }`: the id the database gave `account`, its username in NFC, its e-mail lower-cased. */
export async function assertSignedUp (t: Test, app: App, response: Answer, account: { username: string, email: string }, message = 'signed up'): Promise<void> {
  t.equal(response.statusCode, 201, message)
  const [row] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email.toLowerCase()))
  t.strictSame(response.json(), { id: row?.id, username: account.username.normalize('NFC'), email: account.email.toLowerCase() }, `${message}: body`)
}

/** `{ statusCode, error, message }`: the contract's error body (CONTRACT §4). */
export const errorBody = (statusCode: number, error: string, message: string) => ({ statusCode, error, message })
export const unauthorized = (message: string) => errorBody(401, 'Unauthorized', message)

/** How the log names an e-mail it may not show: its HMAC under the digest key, lower-cased first. */
export const emailHmac = (key: string, email: string) => createHmac('sha256', key).update(email.toLowerCase()).digest('hex')

/** The contract's bodies the tests compare answers with, written out here rather than read from src/. */
export const errorBodies = {
  badCredentials: { statusCode: 401, error: 'Unauthorized', message: 'Credenciales inválidas' },
  tooMany: { statusCode: 429, error: 'Too Many Requests', message: 'Demasiados intentos, inténtelo más tarde' },
  unavailable: { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }
}

/** An answer as `app.inject` gives it, or as test/server-process.ts's `http` does (`status`). */
type AnyAnswer = { statusCode: number, json: () => any } | { status: number, json: () => any }

const COMPACT_JWT = /^[\w-]+\.[\w-]+\.[\w-]+$/

/**
 * A login's 200 whose body is exactly `{ id, token, username, email }` of `account`, the token a
 * compact JWT whose claims name the account (`sub` its username, `uid` its id). Returns the token.
 */
export function assertLoggedIn (t: Test, response: AnyAnswer, account: { id: number, username: string, email: string }, message = 'logged in'): string {
  t.equal('statusCode' in response ? response.statusCode : response.status, 200, message)
  const { token, ...rest } = response.json()
  t.strictSame(rest, { id: account.id, username: account.username, email: account.email }, `${message}: body`)
  const compact = typeof token === 'string' && COMPACT_JWT.test(token)
  t.ok(compact, `${message}: the token is a compact JWT (${typeof token === 'string' ? token.slice(0, 16) + '…' : String(token)})`)
  const claims = compact ? JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) : {}
  t.strictSame({ sub: claims.sub, uid: claims.uid }, { sub: account.username, uid: account.id }, `${message}: the token names the account`)
  return token
}

/** A refused attempt (CONTRACT §9): 429 with exactly the contract's body and a Retry-After of whole seconds, at most `maxRetryAfter`. */
export function assertTooMany (t: Test, response: Answer, message: string, maxRetryAfter = Infinity): void {
  t.equal(response.statusCode, 429, message)
  t.strictSame(response.json(), errorBodies.tooMany, `${message}: body`)
  const retryAfter = String(response.headers['retry-after'])
  t.ok(/^[1-9][0-9]*$/.test(retryAfter) && Number(retryAfter) <= maxRetryAfter, `${message}: Retry-After ${retryAfter}${maxRetryAfter === Infinity ? '' : `, at most ${maxRetryAfter}`}`)
}

/** A refused login: 401 with exactly the contract's body, the same for a wrong password and an unknown e-mail. */
export function assertBadCredentials (t: Test, response: Answer, message = 'wrong credentials'): void {
  t.equal(response.statusCode, 401, message)
  t.strictSame(response.json(), errorBodies.badCredentials, `${message}: body`)
}

let counter = 0
/** A username and e-mail no other test of this process uses. */
export function uniqueUser (prefix = 'u') {
  const tag = `${prefix}${process.pid.toString(36)}${(counter++).toString(36)}`.slice(0, 20)
  return { username: tag, email: `${tag}@example.com`, password: 'Secreto123' }
}

/** A pino destination that keeps every line, raw and parsed (pass `stream` as the logger's). */
export function captureLog () {
  const raw: string[] = []
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({
    write (chunk, _encoding, done) {
      for (const text of String(chunk).split('\n').filter(Boolean)) {
        raw.push(text)
        lines.push(JSON.parse(text))
      }
      done()
    }
  })
  return { raw, lines, stream, text: () => raw.join('\n') }
}

export const TEST_REDIS_URL = 'redis://127.0.0.1:6379'

/** Whether the Redis the tests share answers; tests that need it skip with a message otherwise. */
export async function redisIsUp (url = TEST_REDIS_URL): Promise<boolean> {
  const { Redis } = await import('ioredis')
  const probe = new Redis(url, { lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => {})
  try {
    await probe.connect()
    return (await probe.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    probe.disconnect()
  }
}

/**
 * `false` when the shared Redis answers, else the reason its tests are skipped (what goes
 * untested, when given). Await it before the file's first `t.test`: tap's root test ends
 * once the queue drains, and refuses tests queued after a top-level await.
 */
export async function redisSkipReason (untested?: string): Promise<false | string> {
  if (await redisIsUp()) return false
  return `Redis is not answering at ${TEST_REDIS_URL}` + (untested === undefined ? '' : `: ${untested}`)
}

/** A key prefix no other test uses; its keys are deleted from the shared Redis when the test ends. */
export function redisPrefix (t: Test, url = TEST_REDIS_URL): string {
  const prefix = `ums-test:${randomBytes(6).toString('hex')}:`
  t.teardown(async () => {
    const { Redis } = await import('ioredis')
    const redis = new Redis(url, { maxRetriesPerRequest: 0 })
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    await redis.quit()
  })
  return prefix
}

/** A logged error and its causes, outermost first, as `describeError` wrote them into a log line. */
export const causeChain = (cause: any): any[] => cause ? [cause, ...causeChain(cause.cause)] : []

/** Result rows of `db.execute`, whichever the driver: PGlite gives `{ rows }`, postgres.js an array (copied to a plain one). */
export const rowsOf = (result: unknown) => (Array.isArray(result) ? [...result] : (result as { rows: unknown[] }).rows) as Array<Record<string, unknown>>
