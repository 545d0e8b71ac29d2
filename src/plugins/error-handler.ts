import fp from 'fastify-plugin'
import { HttpError } from '@fastify/sensible'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { databaseUnavailable } from '../db/pg-errors.js'
import { DuplicateUserError } from '../http/errors.js'
import { duplicateFields, fieldErrors, httpError, sendUnavailable } from '../http/error-bodies.js'
import { messages } from '../http/messages.js'
import { requestSecurityEvent } from '../telemetry/security-events.js'
import { describeError } from '../telemetry/error-description.js'

// Fastify's and its plugins' own client errors, in the contract's words.
const FRAMEWORK_ERRORS: Record<string, [number, string]> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, messages.bodyMissing],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, messages.bodyMalformed],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, messages.bodyTooLarge],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, messages.unsupportedMediaType],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, messages.invalidRequest],
  FST_ERR_CTP_INVALID_TYPE: [415, messages.unsupportedMediaType]
}

function clientError (error: FastifyError, request: FastifyRequest): { status: number, body: object } | undefined {
  if (error.validation) {
    const fields = error.validationContext === 'body' ? fieldErrors(error.validation as unknown as Parameters<typeof fieldErrors>[0]) : undefined
    // Field names only: a value may be a password typed in the wrong box.
    requestSecurityEvent(request, 'input_validation_fail', { context: error.validationContext, fields: Object.keys(fields ?? {}) })
    if (fields && Object.keys(fields).length > 0) return { status: 400, body: fields }
    const message = request.body === undefined ? messages.bodyMissing : messages.bodyNotObject
    return { status: 400, body: httpError(400, message) }
  }
  if (error instanceof DuplicateUserError) return { status: 409, body: duplicateFields(error.fields) }
  const known = error.code ? FRAMEWORK_ERRORS[error.code] : undefined
  if (known) return { status: known[0], body: httpError(known[0], known[1]) }
  if (error instanceof SyntaxError && error.statusCode === 400) return { status: 400, body: httpError(400, messages.bodyMalformed) }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Ours (UMS_ codes, sensible's reply helpers) carry Spanish messages; anything else gets a
    // generic one, never an internal text.
    const message = error.code?.startsWith('UMS_') || error instanceof HttpError ? error.message : messages.invalidRequest
    return { status, body: httpError(status, message) }
  }
  return undefined
}

/**
 * The one place that shapes errors: validation → field map, other 4xx → `{ statusCode,
 * error, message }`, database outages and saturation → 503, anything else → a fixed 500
 * (logged with the request's context, never echoed).
 */
export default fp(async function errorHandlerPlugin (app) {
  app.setErrorHandler(function (error: FastifyError, request, reply: FastifyReply) {
    const client = clientError(error, request)
    if (client) return reply.code(client.status).send(client.body)
    if (error.code === 'UMS_SERVICE_UNAVAILABLE' || databaseUnavailable(error)) {
      // Under a flood this runs hundreds of times a second: the codes say enough, a stack would not.
      // Never the message: Drizzle's quotes the SQL and its parameters (hashes, e-mails).
      if ((error as { logged?: boolean }).logged !== true) request.log.warn({ cause: describeError(error, false) }, 'service unavailable')
      return sendUnavailable(reply)
    }
    request.log.error({ err: error }, 'unhandled error')
    return reply.code(500).send(httpError(500, messages.internal))
  })

  // An attacker could probe for valid URLs: unknown paths need a token like any other (SPEC rule 9),
  // which the auth hook has already checked by the time this runs.
  app.setNotFoundHandler(function (_request, reply) {
    return reply.notFound(messages.notFound)
  })
}, { fastify: '5.x', name: 'error-handler', dependencies: ['@fastify/sensible'] })
