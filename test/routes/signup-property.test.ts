import t from 'tap'
import fc from 'fast-check'
import { messages } from '../../src/http/messages.js'
import { build } from '../helper.js'

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
const rawBody = fc.oneof(
  body.map((b) => JSON.stringify(b)),
  fc.json({ maxDepth: 2 }),
  fc.string({ maxLength: 40 })
)

t.test('random sign-up and login bodies never give a 5xx, and every 400 speaks the contract', async (t) => {
  const app = await build(t, 'pglite')
  for (const url of ['/auth/signup', '/auth/login']) {
    await fc.assert(fc.asyncProperty(rawBody, async (payload) => {
      const response = await app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } })
      if (response.statusCode >= 500) throw new Error(`${response.statusCode} for ${payload}`)
      if (![201, 200, 400, 401, 409].includes(response.statusCode)) throw new Error(`unexpected ${response.statusCode}`)
      if (response.statusCode !== 400) return
      const answer = response.json()
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
    t.pass(`${url}: 300 random bodies held the contract`)
  }
})
