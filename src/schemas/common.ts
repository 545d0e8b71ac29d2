import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { ROLES } from '../db/schema.js'

// "Blank" is part of "missing" in CONTRACT §4; `type: 'string'` inside keeps a number from
// also being reported as blank. The errors plugin maps each keyword to its message.
const blank = { type: 'string', pattern: '^\\s*$' }
const empty = { type: 'string', maxLength: 0 }

export const Id = Type.Integer({ minimum: 1, examples: [42] })
export const Role = Type.Union(ROLES.map((role) => Type.Literal(role)), { examples: ['ROLE_USER'] })

/** 3–20 code points (Ajv counts code points, not UTF-16 units), no control characters. */
export const Username = Type.String({ minLength: 3, maxLength: 20, pattern: '^\\P{Cc}*$', not: blank, examples: ['ana'] })

/** The `email` format is replaced by a linear check that runs after the 254 cap (src/validation.ts). */
export const Email = Type.String({ format: 'email', maxLength: 254, not: blank, examples: ['ana@example.com'] })

export const NewPassword = Type.String({
  minLength: 8,
  maxLength: 16,
  pattern: '^(?=[\\s\\S]*\\p{Nd})(?=[\\s\\S]*\\p{Ll})(?=[\\s\\S]*\\p{Lu})',
  not: empty,
  examples: ['Secreto123']
})

/** Login checks presence and type only, so accounts keep working if the rules change. */
export const Password = Type.String({ not: empty, examples: ['Secreto123'] })

/**
 * A reference to a schema registered with `app.addSchema` (see `sharedSchemas`), typed as the
 * schema itself. Each such schema is one named component of the OpenAPI document, where an
 * inline copy would be anonymous (TypeBox 0.34's own recipe for the deprecated `Ref(schema)`).
 */
export function ref<T extends TSchema> (schema: T) {
  if (!schema.$id) throw new Error('ref() needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}

export type Role = Static<typeof Role>
