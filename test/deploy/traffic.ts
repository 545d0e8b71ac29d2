import { Agent, request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { isDeepStrictEqual } from 'node:util'

/** One answer (or its absence) as a client behind the balancer saw it. */
export interface Outcome {
  readonly op: string
  readonly status: number | undefined
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: any
  readonly error: string | undefined
  readonly startedAt: number
  readonly ms: number
  /** The contract's status with another body than the request's: what was wrong with it. */
  readonly wrongBody?: string
}

/**
 * A client on its own loopback source address, like a user's public address in front of the
 * balancer; `keepAlive` keeps its connection to HAProxy open between requests, as browsers do.
 */
export function client (port: number, localAddress: string, keepAlive = true) {
  // Idle connections are dropped after 5 s, before HAProxy's 10 s keep-alive timeout can close one under a new request.
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1, timeout: 5000 }) : false
  return {
    localAddress,
    send (op: string, method: string, path: string, options: { body?: unknown, headers?: Record<string, string> } = {}): Promise<Outcome> {
      const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
      const startedAt = Date.now()
      return new Promise((resolve) => {
        const done = (status: number | undefined, text: string, error?: string, headers = {}) => {
          let body: unknown = text
          try { body = JSON.parse(text) } catch {}
          resolve({ op, status, headers, body, error, startedAt, ms: Date.now() - startedAt })
        }
        const req = request({
          host: '127.0.0.1',
          port,
          localAddress,
          agent,
          method,
          path,
          timeout: 20_000,
          headers: { ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...options.headers }
        }, (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (chunk) => { text += chunk })
          res.on('end', () => done(res.statusCode, text, undefined, res.headers))
          res.on('error', (error) => done(undefined, text, error.message))
        })
        req.on('timeout', () => req.destroy(new Error('timed out after 20 s')))
        req.on('error', (error) => done(undefined, '', `${(error as NodeJS.ErrnoException).code ?? ''} ${error.message}`.trim()))
        req.end(payload)
      })
    },
    close () { if (agent) agent.destroy() }
  }
}

export type Client = ReturnType<typeof client>

let fresh = 0
/** A source address no other client of this process used: each sign-up of the traffic gets one. */
export function freshAddress (): string {
  const n = fresh++
  return `127.20.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`
}

let serial = 0
/** A username and e-mail nobody used; short enough for the 20-character username rule. */
export function newUser () {
  const tag = `lb${process.pid.toString(36)}${(serial++).toString(36)}`.slice(0, 20)
  return { username: tag, email: `${tag}@example.com`, password: 'Secreto123' }
}

/** Sign-ups from one client until an answer other than 201 or `max` attempts; the answers in order, each with the account it sent. */
export async function signUpUntilRefused (from: Client, max: number, headers: (i: number) => Record<string, string> = () => ({})) {
  const answers: Array<Outcome & { readonly user: ReturnType<typeof newUser> }> = []
  for (let i = 0; i < max; i++) {
    const user = newUser()
    const answer = await from.send('signup', 'POST', '/auth/signup', { body: user, headers: headers(i) })
    answers.push({ ...answer, user })
    if (answer.status !== 201) break
  }
  return answers
}

/** The contract's answer to each kind of request of the steady traffic below. */
export const expected: Record<string, number> = { signup: 201, login: 200, me: 200 }

export interface Account { readonly id: number, readonly username: string, readonly email: string, readonly password: string, readonly token: string, readonly client: Client }

/**
 * Steady traffic until `stop()`: each account's client loops over reading its own record (17
 * in 20), logging in (1 in 20) and signing a new user up from a fresh address (2 in 20): few
 * argon2 hashes, so that a busy two-core machine is not simply saturated.
 * Every outcome is kept, with the accounts that sign-ups acknowledged.
 */
export function steadyTraffic (port: number, accounts: readonly Account[], pauseMs = 100) {
  const outcomes: Outcome[] = []
  const acknowledged: Array<{ id: number, email: string }> = []
  let running = true
  let step = 0
  const loops = accounts.map(async (account) => {
    while (running) {
      const pick = step++ % 20
      const record = { id: account.id, username: account.username, email: account.email }
      if (pick < 17) {
        const outcome = await account.client.send('me', 'GET', '/users/me', { headers: { authorization: `Bearer ${account.token}` } })
        outcomes.push(checked(outcome, outcome.body, { ...record, role: 'ROLE_USER' }))
      } else if (pick < 18) {
        const outcome = await account.client.send('login', 'POST', '/auth/login', { body: { email: account.email, password: account.password } })
        const { token, ...rest } = typeof outcome.body === 'object' && outcome.body !== null ? outcome.body : { token: undefined }
        outcomes.push(checked(outcome, { ...rest, token: COMPACT_JWT.test(String(token)) }, { ...record, token: true }))
      } else {
        const user = newUser()
        const outcome = await client(port, freshAddress(), false).send('signup', 'POST', '/auth/signup', { body: user })
        const id = Number.isInteger(outcome.body?.id) ? outcome.body.id : 'an integer'
        outcomes.push(checked(outcome, outcome.body, { id, username: user.username, email: user.email }))
        if (outcome.status === 201 && Number.isInteger(outcome.body?.id)) acknowledged.push({ id: outcome.body.id, email: user.email })
      }
      await sleep(pauseMs)
    }
  })
  return {
    outcomes,
    acknowledged,
    async stop () {
      running = false
      await Promise.all(loops)
      return summary(outcomes)
    }
  }
}

const COMPACT_JWT = /^[\w-]+\.[\w-]+\.[\w-]+$/

/** The outcome, marked when its status is the contract's but its body is not the one expected. */
function checked (outcome: Outcome, seen: unknown, wanted: unknown): Outcome {
  if (outcome.status !== expected[outcome.op] || isDeepStrictEqual(seen, wanted)) return outcome
  return { ...outcome, wrongBody: JSON.stringify(outcome.body).slice(0, 200) }
}

/** Failures are answers other than the contract's status and body for that request, or no answer at all. */
export function summary (outcomes: readonly Outcome[]) {
  const failures = outcomes.filter((o) => o.status !== expected[o.op] || o.wrongBody !== undefined)
  const slowest = outcomes.reduce((max, o) => Math.max(max, o.ms), 0)
  return { requests: outcomes.length, failures, slowest }
}
