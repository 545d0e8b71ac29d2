/**
 * The user concept shared by storage, schemas and routes: roles, and the one normal form of
 * an e-mail. The public record's type is `UserRecord` in src/schemas/users.ts.
 */

export const ROLES = ['ROLE_USER', 'ROLE_ADMIN'] as const
export type Role = typeof ROLES[number]

/** E-mails are stored and compared lower-cased (CONTRACT §2, §5). */
export function normalizeEmail (email: string): string {
  return email.toLowerCase()
}
