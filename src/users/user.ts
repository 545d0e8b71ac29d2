/**
 * The user concept: a username's identity (CONTRACT §4) and the range of ids;
 * the roles, a username's rules and the e-mail's stored form are the schemas' (src/schemas/roles.ts, user-rules.ts).
 */

/** users.id is a PostgreSQL integer: no user has a larger id, and a look-up by one would fail, not miss. */
export const MAX_USER_ID = 2_147_483_647

/**
 * Two usernames are the same when these keys are equal: NFKC, then Unicode toLowerCase
 * (RFC 8265's UsernameCaseMapped), so `alice`, `ALICE` and `ａｌｉｃｅ` are one name. Only
 * this function computes it; the database keeps it in a unique column, because
 * PostgreSQL's lower() depends on the collation and Unicode tables of each server.
 */
export function usernameKey (username: string): string {
  return username.normalize('NFKC').toLowerCase()
}
