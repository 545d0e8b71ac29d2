import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { ROLES } from './roles.js'
import { MAX_EMAIL_LENGTH, USERNAME_BLANK, USERNAME_CHARACTERS, USERNAME_LENGTH } from './user-rules.js'

// "Blank" is part of "missing" in CONTRACT §4; `type: 'string'` inside keeps a number from
// also being reported as blank. src/http/error-bodies.ts maps each keyword to its message.
const blank = { type: 'string', pattern: '^\\s*$' }
const empty = { type: 'string', maxLength: 0 }

export const Id = Type.Integer({ minimum: 1, examples: [42] })
export const Role = Type.Union(ROLES.map((role) => Type.Literal(role)), { examples: ['ROLE_USER'] })

/**
 * CONTRACT §4: not blank, 3–20 code points of the NFC form (`x-nfc-length`), no control or
 * invisible characters (`pattern`), no white space at either end (`x-no-outer-space`). The two
 * `x-` keywords are ours (src/http/validation.ts), OpenAPI extensions to other readers.
 */
export const Username = Type.String({
  not: { type: 'string', pattern: USERNAME_BLANK },
  'x-nfc-length': USERNAME_LENGTH,
  pattern: USERNAME_CHARACTERS,
  'x-no-outer-space': true,
  description: '3 to 20 characters (code points after NFC); no control, format, invisible, private-use or unassigned characters; no white space at either end. Stored in NFC; unique after NFKC and lower-casing.',
  examples: ['ana']
})

/** The `email` format is replaced by a linear check that runs after the length cap (src/http/validation.ts). */
export const Email = Type.String({ format: 'email', maxLength: MAX_EMAIL_LENGTH, not: blank, examples: ['ana@example.com'] })

/**
 * The own-info request's optional e-mail (CONTRACT §5): present, it is checked for type and
 * format only, so a blank one is not a valid e-mail rather than a missing one.
 */
export const OptionalEmail = Type.String({ format: 'email', maxLength: MAX_EMAIL_LENGTH, examples: ['ana@example.com'] })

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
 * A reference to a schema registered with `app.addSchema` (app.ts: `userSchemas`, `errorSchemas`),
 * typed as the schema itself. Each such schema is one named component of the OpenAPI document, where an
 * inline copy would be anonymous (TypeBox 0.34's own recipe for the deprecated `Ref(schema)`).
 */
export function ref<T extends TSchema> (schema: T) {
  if (!schema.$id) throw new Error('ref() needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}
