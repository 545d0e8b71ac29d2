import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { errorResponses } from '../schemas/error-responses.js'
import { listUsersJson } from '../users/users-listing.js'
import { UserList } from '../schemas/users.js'

/** GET /admin/users: every user, for ROLE_ADMIN tokens only. */
const adminRoutes: FastifyPluginAsyncTypebox = async function (app) {
  app.get('/users', {
    config: { role: 'ROLE_ADMIN' },
    schema: {
      tags: ['admin'],
      summary: 'Every user, ordered by id',
      security: [{ bearerAuth: [] }],
      response: { 200: UserList, ...errorResponses }
    }
  }, async function (request, reply) {
    // Fastify's HEAD twin would run the whole listing only to drain it: answer the headers alone.
    if (request.method === 'HEAD') return reply.type('application/json; charset=utf-8').send(Readable.from([]))
    const batches = listUsersJson(app.database)
    // Read the first batch before answering, so a database outage is still a clean 503.
    const first = await batches.next()
    // Separators go out as their own chunks: gluing them to a page would copy the page.
    async function * body () {
      yield '['
      if (!first.done) yield first.value
      for await (const page of batches) {
        yield ','
        yield page
      }
      yield ']'
    }
    // A stream bypasses the serializer: PostgreSQL already wrote each record with exactly
    // the schema's four fields. The stream only pulls a page when the socket has taken the
    // previous one, and Fastify destroys it if the client goes away, which ends the generator
    // between two queries: no cursor or transaction is left open.
    return reply.type('application/json; charset=utf-8').send(Readable.from(body(), { objectMode: false }))
  })
}

export default adminRoutes
