import { AjvCompiler } from '@fastify/ajv-compiler'
import type { TSchema } from '@sinclair/typebox'
import type { Ajv } from 'ajv'
import { hasOuterSpace, isEmail, usernameLength } from '../schemas/user-rules.js'

/**
 * Ajv options for request bodies. No coercion ("not a string" must be reportable) and all
 * errors (one entry per field). allErrors is a DoS risk on big inputs (ajv-compiler's
 * README); here bodies are capped at 16 KiB and schemas have three fields, so it is bounded.
 */
export const ajvOptions = {
  customOptions: { allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: false },
  onCreate: (ajv: Ajv) => {
    ajv.addFormat('email', { type: 'string', validate: isEmail })
    // The username rules JSON Schema cannot say (CONTRACT §4); src/http/error-bodies.ts gives each its rule.
    ajv.addKeyword({
      keyword: 'x-nfc-length',
      type: 'string',
      schemaType: 'object',
      errors: false,
      validate: (range: { minimum: number, maximum: number }, value: string) => {
        const length = usernameLength(value)
        return length >= range.minimum && length <= range.maximum
      }
    })
    ajv.addKeyword({ keyword: 'x-no-outer-space', type: 'string', schemaType: 'boolean', errors: false, validate: (on: boolean, value: string) => !on || !hasOuterSpace(value) })
  }
}

export interface BodyValidator {
  (body: unknown): boolean
  errors?: unknown[] | null
}

/**
 * A body validator compiled exactly as Fastify compiles the routes' (its own Ajv compiler,
 * these options), for code that validates outside a request: the CLI.
 */
export function compileBodyValidator (schema: TSchema): BodyValidator {
  const build = AjvCompiler()({}, { customOptions: ajvOptions.customOptions, onCreate: ajvOptions.onCreate } as never)
  return build({ schema, method: 'POST', url: '/', httpPart: 'body' }) as BodyValidator
}
