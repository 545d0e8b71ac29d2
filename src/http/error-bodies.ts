import { STATUS_CODES } from 'node:http'
import type { FastifyReply } from 'fastify'
import { FIELD_RULES, messages, type FieldRule, type ValidatedField } from './messages.js'
import type { UniqueField } from './errors.js'

/** The contract's general error body: `{ statusCode, error, message }`. */
export function httpError (statusCode: number, message: string) {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

/** CONTRACT §7's 503, wherever it is decided: the fixed message, and `Retry-After: 1`. */
export function sendUnavailable (reply: FastifyReply): FastifyReply {
  return reply.code(503).header('retry-after', '1').send(httpError(503, messages.unavailable))
}

/** The 409 body: one entry per field that collided with an existing account. */
export function duplicateFields (fields: readonly UniqueField[]): Record<string, string> {
  return Object.fromEntries(fields.map((field) => [field, messages.duplicate[field]]))
}

interface AjvError { keyword: string, instancePath: string, params: Record<string, unknown> }

// CONTRACT §4: per field, the first failing rule wins (FIELD_RULES's order). A username's two
// format rules: forbidden characters before white space at the ends.
const RULE_OF_KEYWORD: Record<string, FieldRule> = {
  required: 'missing',
  not: 'missing',
  type: 'type',
  minLength: 'length',
  maxLength: 'length',
  'x-nfc-length': 'length',
  pattern: 'format',
  format: 'format',
  'x-no-outer-space': 'spaces'
}

/** Turns the validator's errors into `{ field: message }`, or undefined when the body itself is wrong. */
export function fieldErrors (errors: readonly AjvError[]): Record<string, string> | undefined {
  const rules = new Map<ValidatedField, FieldRule>()
  for (const error of errors) {
    if (error.instancePath === '' && error.keyword !== 'required') return undefined
    const field = (error.keyword === 'required' ? error.params.missingProperty : error.instancePath.split('/')[1]) as ValidatedField
    const rule = RULE_OF_KEYWORD[error.keyword]
    if (!(field in messages.fields) || !rule) continue
    const current = rules.get(field)
    if (!current || FIELD_RULES.indexOf(rule) < FIELD_RULES.indexOf(current)) rules.set(field, rule)
  }
  // Only the username's schema has a `spaces` keyword, so every rule found has its text.
  const texts: Record<ValidatedField, Partial<Record<FieldRule, string>>> = messages.fields
  return Object.fromEntries([...rules].map(([field, rule]) => [field, texts[field][rule] as string]))
}
