import { STATUS_CODES } from 'node:http'
import { messages, type FieldRule, type ValidatedField } from './messages.js'
import type { UniqueField } from './domain-errors.js'

/** The contract's general error body: `{ statusCode, error, message }`. */
export function httpError (statusCode: number, message: string) {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

/** The 409 body: one entry per field that collided with an existing account. */
export function duplicateFields (fields: readonly UniqueField[]): Record<string, string> {
  return Object.fromEntries(fields.map((field) => [field, messages.duplicate[field]]))
}

interface AjvError { keyword: string, instancePath: string, params: Record<string, unknown> }

// CONTRACT §4: per field, the first failing rule in this order wins.
const RULE_ORDER: readonly FieldRule[] = ['missing', 'type', 'length', 'format']
const RULE_OF_KEYWORD: Record<string, FieldRule> = {
  required: 'missing', not: 'missing', type: 'type', minLength: 'length', maxLength: 'length', pattern: 'format', format: 'format'
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
    if (!current || RULE_ORDER.indexOf(rule) < RULE_ORDER.indexOf(current)) rules.set(field, rule)
  }
  return Object.fromEntries([...rules].map(([field, rule]) => [field, messages.fields[field][rule]]))
}
