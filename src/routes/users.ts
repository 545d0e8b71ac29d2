import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ForbiddenError } from '../errors.js'
import { BadRequest, errorResponses } from '../schemas/errors.js'
import { MeBody, UserRecord } from '../schemas/users.js'

/** GET /users/me: the caller's own record, for ROLE_USER tokens only. */
const usersRoutes: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/me', {
    config: { role: 'ROLE_USER' },
    // The HEAD twin would inherit the body schema, which HEAD cannot have.
    exposeHeadRoute: false,
    // The own-info body is optional: an absent one is an empty request, not an invalid one.
    preValidation: async (request) => { request.body ??= {} },
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
    if (email !== undefined && email.toLowerCase() !== account.email) throw new ForbiddenError()
    return account
  })
}

export default usersRoutes
