/** The two roles (SPEC.md): the stored column's CHECK, the schemas and the routes' role checks. */
export const ROLES = ['ROLE_USER', 'ROLE_ADMIN'] as const
export type Role = typeof ROLES[number]
/** What a sign-up gets (SPEC): the stored column's default and the insert's value alike. */
export const DEFAULT_ROLE: Role = 'ROLE_USER'
