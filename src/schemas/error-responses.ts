import { Type } from '@sinclair/typebox'

/** `{ statusCode, error, message }`, registered by @fastify/sensible under this id. */
export const HTTP_ERROR_ID = 'HttpError'
export const HttpError = Type.Ref(HTTP_ERROR_ID)

/** The flat field → message object of a 400 or 409. */
export const FieldErrors = Type.Record(Type.String(), Type.String(), {
  description: 'One entry per failing field: field name → message',
  examples: [{ email: 'El email debe ser valido' }]
})

/**
 * A 400 is either the field map or, for a body that is absent or not JSON, the general shape.
 * The field map comes first: sensible's HttpError requires no property, so it would match
 * (and strip) any object, while a map of strings cannot match `{ statusCode: 400, ... }`.
 */
export const BadRequest = Type.Union([FieldErrors, HttpError])

export const errorResponses = {
  401: HttpError,
  403: HttpError,
  413: HttpError,
  415: HttpError,
  429: HttpError,
  500: HttpError,
  503: HttpError
}
