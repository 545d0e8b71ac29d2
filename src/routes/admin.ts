import { Readable } from 'node:stream'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ref } from '../schemas/common.js'
import { commonReplies, errorReply, unauthorizedReply, unavailableReply } from '../http/error-responses.js'
import { jsonResponse } from '../schemas/responses.js'
import { UserList, type UserRecord } from '../schemas/users.js'
import { usersJsonStream } from '../users/users-listing.js'

/** GET /admin/users: every user, for ROLE_ADMIN tokens only. */
const adminRoutes: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/users', {
    config: { role: 'ROLE_ADMIN' },
    schema: {
      tags: ['admin'],
      operationId: 'listUsers',
      summary: 'Every user, ordered by id',
      description: 'For ROLE_ADMIN tokens exactly. No paging: the answer streams, however many users there are.',
      security: [{ bearerAuth: [] }],
      response: {
        // The handler sends the stream of the list's JSON text; the document shows what it carries.
        200: jsonResponse('Every user, ordered by id, without password hashes.', Type.Unsafe<UserRecord[] | Readable>(ref(UserList)), {
          example: [
            { id: 1, username: 'admin', email: 'admin@example.com', role: 'ROLE_ADMIN' },
            { id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER' }
          ]
        }),
        // GET bodies are parsed app-wide (for /users/me), so a body that is not JSON is refused here too.
        400: errorReply(400, 'The request carries a body that is not valid JSON.', ['bodyMalformed']),
        401: unauthorizedReply,
        403: errorReply(403, 'The token\'s role is not ROLE_ADMIN.', ['forbidden']),
        ...commonReplies,
        503: unavailableReply('The database is unreachable.')
      }
    }
  }, async function (request, reply) {
    // Fastify's HEAD twin would run the whole listing only to drain it: answer the headers alone.
    if (request.method === 'HEAD') return reply.type('application/json; charset=utf-8').send(Readable.from([]))
    // A stream bypasses the serializer: each record is written with exactly the schema's
    // four fields (src/db/copy-json.ts). Fastify destroys the stream if the client goes
    // away, which stops the listing between two pages: no cursor or transaction is left open.
    const listing = await usersJsonStream(app.database)
    // The response deadline answered while the first page came (src/plugins/response-deadline.ts).
    if (reply.sent) {
      listing.destroy()
      return reply
    }
    return reply.type('application/json; charset=utf-8').send(listing)
  })
}

export default adminRoutes
