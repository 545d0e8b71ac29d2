/**
 * A user's fields as the schemas, the validator's keywords and storage share them (CONTRACT
 * §4): a username in NFC, 3-20 code points of that form, nothing blank, invisible or spaced at
 * either end; an e-mail lower-cased. A username's identity (the key that makes it unique) is
 * the users concept's (src/users/user.ts).
 */

/** E-mails are stored and compared lower-cased (CONTRACT §2, §5). */
export function normalizeEmail (email: string): string {
  return email.toLowerCase()
}

export const MAX_EMAIL_LENGTH = 254

// Linear: every quantified group is separated from the next by a character it cannot match.
const EMAIL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/

/** The e-mail check of CONTRACT §4: the length cap first, then a regular expression without backtracking blow-ups. */
export function isEmail (value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && EMAIL.test(value)
}


/** Usernames are stored in NFC, and their length counts this form's code points. */
export function normalizeUsername (username: string): string {
  return username.normalize('NFC')
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
