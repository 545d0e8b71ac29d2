import { STATUS_CODES } from 'node:http'
import fp from 'fastify-plugin'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { databaseUnavailable } from '../db/errors.js'
import { DuplicateUserError } from '../errors.js'
import { messages, type FieldRule, type ValidatedField } from '../messages.js'
import { requestSecurityEvent } from '../security-events.js'
import { describeError } from '../logger.js'

interface AjvError { keyword: string, instancePath: string, params: Record<string, unknown> }

// CONTRACT §4: per field, the first failing rule in this order wins.
const RULE_ORDER: readonly FieldRule[] = ['missing', 'type', 'length', 'format']
const RULE_OF_KEYWORD: Record<string, FieldRule> = {
  required: 'missing', not: 'missing', type: 'type', minLength: 'length', maxLength: 'length', pattern: 'format', format: 'format'
}

/** Turns the validator's errors into `{ field: message }`, or undefined when the body itself is wrong. */
export function fieldErrors (errors: readonly AjvError[]): Record<string, string> | undefined {
  const rules = new Map<ValidatedField, FieldRule>()
  for (const error of errors) {
    if (error.instancePath === '' && error.keyword !== 'required') return undefined
    const field = (error.keyword === 'required' ? error.params.missingProperty : error.instancePath.split('/')[1]) as ValidatedField
    const rule = RULE_OF_KEYWORD[error.keyword]
    if (!(field in messages.fields) || !rule) continue
    const current = rules.get(field)
    if (!current || RULE_ORDER.indexOf(rule) < RULE_ORDER.indexOf(current)) rules.set(field, rule)
  }
  return Object.fromEntries([...rules].map(([field, rule]) => [field, messages.fields[field][rule]]))
}

export function httpError (statusCode: number, message: string) {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

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
    const fields = error.validationContext === 'body' ? fieldErrors(error.validation as AjvError[]) : undefined
    // Field names only: a value may be a password typed in the wrong box.
    requestSecurityEvent(request, 'input_validation_fail', { context: error.validationContext, fields: Object.keys(fields ?? {}) })
    if (fields && Object.keys(fields).length > 0) return { status: 400, body: fields }
    const message = request.body === undefined ? messages.bodyMissing : messages.bodyNotObject
    return { status: 400, body: httpError(400, message) }
  }
  if (error instanceof DuplicateUserError) return { status: 409, body: error.fields }
  const known = error.code ? FRAMEWORK_ERRORS[error.code] : undefined
  if (known) return { status: known[0], body: httpError(known[0], known[1]) }
  if (error instanceof SyntaxError && error.statusCode === 400) return { status: 400, body: httpError(400, messages.bodyMalformed) }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Our own errors carry Spanish messages; anything else gets a generic one, never an internal text.
    const message = error.code?.startsWith('UMS_') ? error.message : messages.invalidRequest
    return { status, body: httpError(status, message) }
  }
  return undefined
}

/**
 * The one place that shapes errors: validation → field map, other 4xx → `{ statusCode,
 * error, message }`, database outages and saturation → 503, anything else → a fixed 500
 * (logged with the request's context, never echoed).
 */
export default fp(async function errorsPlugin (app) {
  app.setErrorHandler(function (error: FastifyError, request, reply: FastifyReply) {
    const client = clientError(error, request)
    if (client) return reply.code(client.status).send(client.body)
    if (error.code === 'UMS_SERVICE_UNAVAILABLE' || databaseUnavailable(error)) {
      // Under a flood this runs hundreds of times a second: the codes say enough, a stack would not.
      // Never the message: Drizzle's quotes the SQL and its parameters (hashes, e-mails).
      request.log.warn({ cause: describeError(error, false) }, 'service unavailable')
      return reply.code(503).header('retry-after', '1').send(httpError(503, messages.unavailable))
    }
    request.log.error({ err: error }, 'unhandled error')
    return reply.code(500).send(httpError(500, messages.internal))
  })

  // An attacker could probe for valid URLs: unknown paths need a token like any other (SPEC rule 9),
  // which the auth hook has already checked by the time this runs.
  app.setNotFoundHandler(function (_request, reply) {
    return reply.code(404).send(httpError(404, messages.notFound))
  })
}, { fastify: '5.x', name: 'errors' })
