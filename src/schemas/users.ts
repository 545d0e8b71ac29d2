import { Type, type Static } from '@sinclair/typebox'
import { Email, Id, NewPassword, OptionalEmail, Password, Role, Username, ref } from './common.js'
import { USERNAME_LENGTH } from './user-rules.js'

// Each schema has an $id: it is registered once (app.ts) and is a named component of the OpenAPI
// document. Bodies accept unknown fields (CONTRACT §5); answers have exactly theirs.

export const SignupBody = Type.Object({ username: Username, email: Email, password: NewPassword }, {
  $id: 'SignupBody',
  description: 'The sign-up request. Unknown fields, `role` included, are ignored: a new account is always ROLE_USER.'
})
export const LoginBody = Type.Object({ email: Email, password: Password }, {
  $id: 'LoginBody',
  description: 'The login request. Only presence, type and the e-mail format are checked.'
})
/** SPEC.md's own-info request; optional, and only its e-mail is checked (CONTRACT §5). */
export const MeBody = Type.Object({
  email: Type.Optional(OptionalEmail),
  password: Type.Optional(Type.Unknown({ description: 'Accepted, never read: the token is the proof of identity.' }))
}, {
  $id: 'MeBody',
  description: 'The own-info request, optional. An `email`, when present, must be the caller\'s.'
})

const StoredEmail = Type.String({ format: 'email', description: 'As stored: lower-cased.', examples: ['ana@example.com'] })
const StoredUsername = Type.String({ minLength: USERNAME_LENGTH.minimum, maxLength: USERNAME_LENGTH.maximum, examples: ['ana'] })
const answer = { additionalProperties: false } as const

export const SignupResponse = Type.Object({ id: Id, username: StoredUsername, email: StoredEmail }, {
  ...answer,
  $id: 'SignupResponse',
  description: 'The new account.'
})
export const LoginResponse = Type.Object({
  id: Id,
  token: Type.String({ description: 'The bearer token: a JWT (HS256 unless `JWT_ALGORITHM` says EdDSA or ES256) carrying the username (`sub`), role and user id (`uid`).' }),
  username: StoredUsername,
  email: StoredEmail
}, { ...answer, $id: 'LoginResponse', description: 'The account and its bearer token.' })

/** A token as login issues it, signed with the development secret (long expired). */
export const loginExample = {
  id: 2,
  token: 'eyJhbGciOiJIUzI1NiIsInR5cCI6ImF0K2p3dCJ9.eyJzdWIiOiJ1c2VyIiwicm9sZSI6IlJPTEVfVVNFUiIsInVpZCI6MiwianRpIjoiNGQ1YjNmMWUtOWM0Ny00YjFlLWEzMmUtN2QxZjBmYjVkNzE4IiwiaWF0IjoxNzk1MDAwMDAwLCJleHAiOjE3OTUwODY0MDAsImlzcyI6InVzZXItbWFuYWdlbWVudCIsImF1ZCI6InVzZXItbWFuYWdlbWVudCJ9.THJoItUVza6l0GYfyysQk0hWA9Iql8VsnzPAkQ_LPFw',
  username: 'user',
  email: 'user@example.com'
}

export const UserRecord = Type.Object({ id: Id, username: StoredUsername, email: StoredEmail, role: Role }, {
  ...answer,
  $id: 'UserRecord',
  description: 'A user as stored, without the password hash.'
})
export const UserList = Type.Array(ref(UserRecord), { $id: 'UserList', description: 'Every user, ordered by id.' })

export const userSchemas = [SignupBody, LoginBody, MeBody, SignupResponse, LoginResponse, UserRecord, UserList]

export type SignupBody = Static<typeof SignupBody>
export type LoginBody = Static<typeof LoginBody>
export type MeBody = Static<typeof MeBody>
export type UserRecord = Static<typeof UserRecord>
