import { isDeepStrictEqual } from 'node:util'
import { eq } from 'drizzle-orm'
import t from 'tap'
import fc from 'fast-check'
import { users } from '../../src/db/schema.js'
import { messages } from '../../src/http/messages.js'
import { build, errorBodies } from '../helper.js'

const fieldMessages: Record<string, string[]> = Object.fromEntries(Object.entries(messages.fields).map(([field, rules]) => [field, Object.values(rules)]))
const generalMessages = [messages.bodyMissing, messages.bodyMalformed, messages.bodyNotObject]

// Values that stress every rule: near-miss strings, unicode, control characters, wrong types.
const anyValue = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ unit: 'grapheme', maxLength: 24 }),
  fc.string({ unit: 'binary', maxLength: 24 }),
  fc.constantFrom('', '   ', 'Secreto123', 'ana@example.com', 'a@b', '😀😀😀', 'x'.repeat(300)),
  fc.emailAddress(),
  fc.integer(), fc.double(), fc.boolean(), fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 })
)
const body = fc.record({ username: anyValue, email: anyValue, password: anyValue, role: anyValue }, { requiredKeys: [] })
// Valid bodies from a small pool, so that sign-ups succeed and collide and logins succeed and fail.
const pools = {
  username: ['ana', 'Ana', '\uff21\uff4e\uff41', 'beto', 'Jose\u0301', 'Jos\u00e9'],
  email: ['ana@example.com', 'ANA@example.com', 'beto@example.com', 'jose@example.com'],
  password: ['Secreto123', 'Otra12345x']
}
const plausible = fc.record({ username: fc.constantFrom(...pools.username), email: fc.constantFrom(...pools.email), password: fc.constantFrom(...pools.password) })
/** A body of the valid pool: every field passes validation, so a 400 is wrong. */
const fromPool = (payload: string) => {
  try {
    const sent = JSON.parse(payload)
    return typeof sent === 'object' && sent !== null && Object.keys(sent).length === 3 && (['username', 'email', 'password'] as const).every((field) => pools[field].includes(sent[field]))
  } catch { return false }
}
const rawBody = fc.oneof(
  body.map((b) => JSON.stringify(b)),
  plausible.map((b) => JSON.stringify(b)),
  fc.json({ maxDepth: 2 }),
  fc.string({ maxLength: 40 })
)

/** What each URL may answer besides 400. */
const otherStatuses: Record<string, number[]> = { '/auth/signup': [201, 409], '/auth/login': [200, 401] }
const conflicts = { email: 'El email ya está registrado', username: 'El username ya está en uso' }
const COMPACT_JWT = /^[\w-]+\.[\w-]+\.[\w-]+$/

t.test('random sign-up and login bodies never give a 5xx, and every answer speaks the contract', async (t) => {
  const app = await build(t, 'pglite')
  /** The stored account whose e-mail the body named, as the answers must show it. */
  const storedAccount = async (payload: string) => {
    const { email } = JSON.parse(payload)
    const [row] = await app.database.db.select({ id: users.id, username: users.username, email: users.email }).from(users).where(eq(users.email, String(email).toLowerCase()))
    return row
  }
  for (const url of ['/auth/signup', '/auth/login']) {
    const seen: Record<number, number> = {}
    await fc.assert(fc.asyncProperty(rawBody, async (payload) => {
      const response = await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })
      seen[response.statusCode] = (seen[response.statusCode] ?? 0) + 1
      if (response.statusCode >= 500) throw new Error(`${response.statusCode} for ${payload}`)
      if (response.statusCode !== 400 && !otherStatuses[url].includes(response.statusCode)) throw new Error(`unexpected ${response.statusCode} from ${url} for ${payload}`)
      const answer = response.json()
      const wrong = (what: string) => new Error(`${url}: ${what}: ${response.statusCode} ${response.body} for ${payload}`)
      if (response.statusCode === 400 && fromPool(payload)) throw wrong('a valid body refused')
      switch (response.statusCode) {
        case 201: {
          // The stored row, the username in NFC and the e-mail lower-cased, as sent.
          const sent = JSON.parse(payload)
          const row = await storedAccount(payload)
          const expected = { id: row?.id, username: String(sent.username).normalize('NFC'), email: String(sent.email).toLowerCase() }
          if (!isDeepStrictEqual(answer, expected) || !isDeepStrictEqual(row, expected)) throw wrong(`not the stored account ${JSON.stringify(row)}`)
          return
        }
        case 409: {
          const entries = Object.entries(answer)
          if (entries.length === 0 || entries.some(([field, message]) => conflicts[field as keyof typeof conflicts] !== message)) throw wrong('not a conflict body')
          return
        }
        case 200: {
          const { token, ...rest } = answer
          if (!isDeepStrictEqual(rest, await storedAccount(payload)) || typeof token !== 'string' || !COMPACT_JWT.test(token)) throw wrong('not the stored account with a token')
          return
        }
        case 401:
          if (!isDeepStrictEqual(answer, errorBodies.badCredentials)) throw wrong('not the contract\'s 401')
          return
      }
      if ('statusCode' in answer) {
        if (answer.statusCode !== 400 || answer.error !== 'Bad Request' || !generalMessages.includes(answer.message)) throw new Error(`bad 400 body ${response.body}`)
        return
      }
      const entries = Object.entries(answer)
      if (entries.length === 0) throw new Error('empty 400 body')
      for (const [field, message] of entries) {
        if (!fieldMessages[field]?.includes(message as string)) throw new Error(`unknown ${field}: ${message}`)
      }
    }), { numRuns: 300 })
    // Not 400s alone: a service that refused every body would hold every check above.
    t.strictSame(otherStatuses[url].filter((status) => !(seen[status] > 0)), [], `${url}: 300 random bodies held the contract, each kind of answer among them (statuses seen: ${JSON.stringify(seen)})`)
  }
})
