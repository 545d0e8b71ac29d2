import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ForbiddenError } from '../domain-errors.js'
import { requestSecurityEvent } from '../security-events.js'
import { BadRequest, errorResponses } from '../schemas/error-responses.js'
import { normalizeEmail } from '../users/user.js'
import { MeBody, UserRecord } from '../schemas/users.js'

/** GET /users/me: the caller's own record, for ROLE_USER tokens only. */
const usersRoutes: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/me', {
    config: { role: 'ROLE_USER' },
    // The HEAD twin would inherit the body schema, which HEAD cannot have.
    exposeHeadRoute: false,
    // The own-info body is optional: an absent one (no body, or an empty one with
    // `Content-Type: application/json`, which clients often send on every request) is an
    // empty request, not an invalid one. Only undefined is absent: a JSON `null` was sent,
    // and is not an object (400).
    preValidation: async (request) => { if (request.body === undefined) request.body = {} },
    schema: {
      tags: ['users'],
      summary: 'The caller\'s own record',
      description: 'The JSON body of SPEC.md is optional; when it carries an e-mail, it must be the caller\'s. Its password is never read.',
      security: [{ bearerAuth: [] }],
      body: MeBody,
      response: { 200: UserRecord, 400: BadRequest, ...errorResponses }
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
}

export default usersRoutes
