import { Type, type TSchema } from '@sinclair/typebox'
import { httpError } from './error-bodies.js'
import { messages } from './messages.js'
import { ref } from '../schemas/common.js'
import { headers, jsonResponse, type Example } from '../schemas/responses.js'

/** `{ statusCode, error, message }`: every error but field validation and duplicates (CONTRACT §4). */
export const HttpError = Type.Object({
  statusCode: Type.Integer({ minimum: 400, maximum: 599, description: 'The response\'s status code.' }),
  error: Type.String({ description: 'The status code\'s HTTP reason phrase.' }),
  message: Type.String({ description: 'What went wrong, in Spanish.' })
}, { $id: 'HttpError', additionalProperties: false, description: 'An error other than a field-level one.' })

const fieldMessage = (field: string) => Type.Optional(Type.String({ description: `Why \`${field}\` was refused, in Spanish.` }))

/** The flat field → message object of a 400, one entry per failing field. */
export const FieldErrors = Type.Object({
  username: fieldMessage('username'),
  email: fieldMessage('email'),
  password: fieldMessage('password')
}, { $id: 'FieldErrors', additionalProperties: false, minProperties: 1, description: 'One entry per failing field of the body: the first failing rule of each (missing, not a string, length, format).' })

/** A sign-up that collides with existing accounts (409): one entry per duplicated field. */
export const DuplicateFields = Type.Object({
  username: Type.Optional(Type.String({ description: `\`${messages.duplicate.username}\`: taken, compared without regard to case.` })),
  email: Type.Optional(Type.String({ description: `\`${messages.duplicate.email}\`.` }))
}, { $id: 'DuplicateFields', additionalProperties: false, minProperties: 1, description: 'The fields that belong to an existing account.' })

export const errorSchemas: TSchema[] = [HttpError, FieldErrors, DuplicateFields]

type MessageKey = { [K in keyof typeof messages]: typeof messages[K] extends string ? K : never }[keyof typeof messages]

/** The body the service sends for `status` with the message `key`. */
const errorBody = (status: number, key: MessageKey) => httpError(status, messages[key])

function errorExamples (status: number, keys: MessageKey[]): Record<string, Example> {
  return Object.fromEntries(keys.map((key) => [key, { summary: messages[key], value: errorBody(status, key) }]))
}

/** An `{ statusCode, error, message }` response; its examples are the messages the service sends. */
export function errorReply (status: number, description: string, keys: MessageKey[], extraHeaders: Record<string, TSchema> = {}) {
  const examples = keys.length === 1 ? { example: errorBody(status, keys[0]) } : { examples: errorExamples(status, keys) }
  return jsonResponse(description, ref(HttpError), { ...examples, headers: extraHeaders })
}

/**
 * A 400: the field map when fields fail validation, the general shape when the body itself is
 * wrong. The field map comes first, and neither can match the other's bodies (both are closed).
 */
export function badRequestReply (description: string, fields: Record<string, string>, keys: MessageKey[]) {
  const examples = { fields: { summary: 'Fields that failed validation', value: fields }, ...errorExamples(400, keys) }
  return jsonResponse(description, Type.Union([ref(FieldErrors), ref(HttpError)]), { examples })
}

export const duplicateReply = jsonResponse('The e-mail or the username (or both) belong to an existing account.', ref(DuplicateFields), {
  examples: {
    email: { summary: messages.duplicate.email, value: { email: messages.duplicate.email } },
    both: { summary: 'Both taken', value: { username: messages.duplicate.username, email: messages.duplicate.email } }
  }
})

/** Answers every operation can give, whatever its role or body. */
export const commonReplies = {
  // Answered by the HTTP parser, on the route whose body it was reading (src/http/refusals.ts).
  408: errorReply(408, 'The body did not arrive within 10 s of the request\'s start; the connection is closed.', ['requestTimeout']),
  413: errorReply(413, 'The body is over 16 KiB.', ['bodyTooLarge']),
  415: errorReply(415, 'A body whose `Content-Type` is not JSON.', ['unsupportedMediaType']),
  500: errorReply(500, 'Something unexpected failed. It is logged with the request id; its details never leave the service.', ['internal'])
}

export const unauthorizedReply = errorReply(401, 'No bearer token, or one that is invalid, expired, or whose user no longer exists.', ['tokenMissing', 'tokenInvalid', 'tokenExpired'], headers.wwwAuthenticate)

export function unavailableReply (description: string) {
  return errorReply(503, `${description} Try again after \`Retry-After\`.`, ['unavailable'], headers.retryAfter)
}
