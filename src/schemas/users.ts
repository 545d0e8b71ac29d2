import { Type, type Static } from '@sinclair/typebox'
import { Email, Id, NewPassword, Password, Role, Username } from './common.js'

export const SignupBody = Type.Object({ username: Username, email: Email, password: NewPassword })
export const LoginBody = Type.Object({ email: Email, password: Password })
/** SPEC.md's own-info request; optional, and only its e-mail is checked (CONTRACT §5). */
export const MeBody = Type.Object({ email: Type.Optional(Email), password: Type.Optional(Type.Unknown()) })

export const SignupResponse = Type.Object({ id: Id, username: Type.String(), email: Type.String() })
export const LoginResponse = Type.Object({ id: Id, token: Type.String(), username: Type.String(), email: Type.String() })
export const UserRecord = Type.Object({ id: Id, username: Type.String(), email: Type.String(), role: Role })
export const UserList = Type.Array(UserRecord)

export type SignupBody = Static<typeof SignupBody>
export type LoginBody = Static<typeof LoginBody>
export type MeBody = Static<typeof MeBody>
export type UserRecord = Static<typeof UserRecord>
