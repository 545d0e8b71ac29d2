import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ForbiddenError } from '../http/errors.js'
import { requestSecurityEvent } from '../telemetry/security-events.js'
import { messages } from '../http/messages.js'
import { ref } from '../schemas/common.js'
import { badRequestReply, commonReplies, errorReply, unauthorizedReply, unavailableReply } from '../http/error-responses.js'
import { jsonResponse } from '../schemas/responses.js'
import { normalizeEmail } from '../schemas/user-rules.js'
import { MeBody, UserRecord } from '../schemas/users.js'

/** GET /users/me: the caller's own record, for ROLE_USER tokens only. */
const usersRoutes: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/me', {
    config: { role: 'ROLE_USER' },
    // Fastify's HEAD twin would inherit the body schema, which a HEAD route cannot declare: HEAD is below.
    exposeHeadRoute: false,
    // The own-info body is optional: an absent one (no body, or an empty one with
    // `Content-Type: application/json`, which clients often send on every request) is an
    // empty request, not an invalid one. Only undefined is absent: a JSON `null` was sent,
    // and is not an object (400).
    preValidation: (request, _reply, done) => {
      if (request.body === undefined) request.body = {}
      done()
    },
    schema: {
      tags: ['users'],
      operationId: 'getOwnRecord',
      summary: 'The caller\'s own record',
      description: 'For ROLE_USER tokens exactly. The JSON body is optional; when it carries an `email`, that must be the caller\'s. Its password is never read: the token is the proof of identity.',
      security: [{ bearerAuth: [] }],
      body: ref(MeBody),
      response: {
        200: jsonResponse('The caller\'s account as stored now.', ref(UserRecord), { example: { id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER' } }),
        400: badRequestReply('The body\'s `email` is not a valid e-mail, or the body is not JSON or not an object.', {
          email: messages.fields.email.format
        }, ['bodyMalformed', 'bodyNotObject']),
        401: unauthorizedReply,
        403: errorReply(403, 'The token\'s role is not ROLE_USER, or the body\'s `email` is not the caller\'s.', ['forbidden']),
        ...commonReplies,
        503: unavailableReply('The database is unreachable.')
      }
    }
  }, async function (request) {
    // The auth hook looked the account up; the token is the proof of identity.
    const account = request.account!
    const email = request.body?.email
    if (email !== undefined && normalizeEmail(email) !== account.email) {
      requestSecurityEvent(request, 'authz_fail', { statusCode: 403, reason: 'email_mismatch', userId: account.id })
      throw new ForbiddenError()
    }
    return account
  })

  // GET's answer without its body (RFC 9110 §9.3.2): the same role rule, headers and length.
  app.head('/me', {
    config: { role: 'ROLE_USER' },
    schema: { hide: true, response: { 200: ref(UserRecord) } }
  }, async (request) => request.account!)
}

export default usersRoutes
