/**
 * The user concept shared by storage, schemas and routes: roles, the one normal form of an
 * e-mail, and a username's rules, stored form and identity (CONTRACT §4).
 */

export const ROLES = ['ROLE_USER', 'ROLE_ADMIN'] as const
export type Role = typeof ROLES[number]
/** What a sign-up gets (SPEC): the stored column's default and the insert's value alike. */
export const DEFAULT_ROLE: Role = 'ROLE_USER'

/** users.id is a PostgreSQL integer: no user has a larger id, and a look-up by one would fail, not miss. */
export const MAX_USER_ID = 2_147_483_647

/** E-mails are stored and compared lower-cased (CONTRACT §2, §5). */
export function normalizeEmail (email: string): string {
  return email.toLowerCase()
}

/** Usernames are stored in NFC, and their length counts this form's code points. */
export function normalizeUsername (username: string): string {
  return username.normalize('NFC')
}

/**
 * Two usernames are the same when these keys are equal: NFKC, then Unicode toLowerCase
 * (RFC 8265's UsernameCaseMapped), so `alice`, `ALICE` and `ａｌｉｃｅ` are one name. Only
 * this function computes it; the database keeps it in a unique column, because
 * PostgreSQL's lower() depends on the collation and Unicode tables of each server.
 */
export function usernameKey (username: string): string {
  return username.normalize('NFKC').toLowerCase()
}

export const USERNAME_LENGTH = { minimum: 3, maximum: 20 } as const

export function usernameLength (username: string): number {
  let codePoints = 0
  for (const _ of normalizeUsername(username)) codePoints++
  return codePoints
}

// Regular-expression sources (Ajv compiles patterns with the `u` flag, so \p{…} works).
// U+2800 BRAILLE PATTERN BLANK is not White_Space but is drawn as one.
const SPACE = '\\p{White_Space}\\u2800'
// Characters drawn as nothing: zero-width, fillers (U+3164), variation selectors, tags…
const INVISIBLE = '\\p{Default_Ignorable_Code_Point}'

/** "Blank" counts as missing: nothing but white space and invisible characters. */
export const USERNAME_BLANK = `^[${SPACE}${INVISIBLE}]*$`

/**
 * No control (Cc), format (Cf), surrogate, private-use or unassigned code point, nothing
 * invisible, and no U+FFFD: it only stands for bytes a decoder lost.
 */
export const USERNAME_CHARACTERS = `^[^\\p{Cc}\\p{Cf}\\p{Cs}\\p{Co}\\p{Cn}${INVISIBLE}\\ufffd]*$`

const OUTER_SPACE = new RegExp(`^[${SPACE}]|[${SPACE}]$`, 'u')

/** True when the name begins or ends with white space (or a braille blank). */
export function hasOuterSpace (username: string): boolean {
  return OUTER_SPACE.test(username)
}
