import { Type, type TSchema } from '@sinclair/typebox'

/** The X-Request-Id the service takes from a caller (src/app.ts's genReqId); others get a UUID. */
export const REQUEST_ID_PATTERN = '^[A-Za-z0-9._-]{1,64}$'

/**
 * The headers responses declare. Names are written as they appear in the HTTP spec; the
 * service sends them lower-cased, and header names match without regard to case.
 */
export const headers = {
  requestId: {
    'X-Request-Id': Type.String({
      description: 'The request\'s id, in every log line of the request: the caller\'s `X-Request-Id` when it is 1–64 characters of `[A-Za-z0-9._-]`, a new UUID otherwise.',
      pattern: REQUEST_ID_PATTERN
    })
  },
  retryAfter: {
    'Retry-After': Type.Integer({ minimum: 1, description: 'Seconds to wait before trying again.' })
  },
  wwwAuthenticate: {
    'WWW-Authenticate': Type.String({
      description: '`Bearer` without a token, `Bearer error="invalid_token"` with one that failed (RFC 6750).',
      enum: ['Bearer', 'Bearer error="invalid_token"']
    })
  }
}

export interface Example { summary: string, value: unknown }

interface ResponseOptions {
  readonly example?: unknown
  readonly examples?: Record<string, Example>
  readonly headers?: Record<string, TSchema>
}

/**
 * One response of an operation, in Fastify's `content` form, which @fastify/swagger copies into
 * the OpenAPI document as it is: a description, the headers (X-Request-Id on every answer), and
 * a JSON body with its example(s). Fastify serializes with `schema` and ignores the rest.
 */
export function jsonResponse<T extends TSchema> (description: string, schema: T, options: ResponseOptions = {}) {
  const media = {
    schema,
    ...(options.example === undefined ? {} : { example: options.example }),
    ...(options.examples === undefined ? {} : { examples: options.examples })
  }
  return { description, headers: { ...headers.requestId, ...options.headers }, content: { 'application/json': media } }
}
