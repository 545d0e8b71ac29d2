// Fastify doing the database-bound ceiling's work (bench/db-ceiling.js) for GET /users/me, with
// the service's per-request extras added part by part, to show what the framework and each
// part cost. FLOOR_PARTS, any of:
//   schema  the body and response schemas (Ajv, fast-json-stringify)
//   log     the service's request log line, production logger options and deferred request logger
//           (src/telemetry/logger.ts and request-log.ts, from the build)
//   hooks   hooks of the service's shape, the three below together:
//   queue     the deadline's arrival queue (src/http/arrival-queue.ts, from the build)
//   edges     an onRequest, a preParsing and an onSend hook like http-edges'
//   headers   the onSend hook that sets the answer's three headers
//   uuid    a random request id (randomUUID) for every request
//   batch   the look-ups of one turn of the event loop in one statement, as the batched ceiling's
// The token check is an async onRequest hook, as in the service; the look-up is postgres.js's.
// Env: DATABASE_URL, JWT_SECRET, JWT_ISSUER, JWT_AUDIENCE, PORT, FLOOR_PARTS.
// Usage: DATABASE_URL=… JWT_SECRET=… PORT=18092 FLOOR_PARTS=schema,log node bench/fastify-floor.js
import { randomUUID } from 'node:crypto'
import Fastify, { LogController } from 'fastify'
import postgres from 'postgres'
import { createArrivalQueue } from '../dist/http/arrival-queue.js'
import { loggerOptions, stdoutDestination } from '../dist/telemetry/logger.js'
import { deferredChildLogger, requestLogHook } from '../dist/telemetry/request-log.js'
import { ceilingVerifier, userLookUp } from './lib.js'

const env = process.env
const parts = new Set((env.FLOOR_PARTS ?? '').split(',').filter(Boolean))
if (parts.has('hooks')) for (const part of ['queue', 'edges', 'headers']) parts.add(part)
const sql = postgres(env.DATABASE_URL, { max: 10, max_pipeline: 0, onnotice: () => {} })
const verify = ceilingVerifier(env)
const lookUp = userLookUp(sql, { batched: parts.has('batch') })
const logger = parts.has('log') ? { ...loggerOptions({ profile: 'production', logLevel: 'info' }), stream: stdoutDestination() } : false
const app = Fastify({ logger, childLoggerFactory: parts.has('log') ? deferredChildLogger : undefined, logController: new LogController({ disableRequestLogging: true }), genReqId: parts.has('uuid') ? () => randomUUID() : undefined })
app.addHttpMethod('GET', { hasBody: true, overrideExisting: true })

if (parts.has('log')) app.addHook('onResponse', requestLogHook(app.log))
if (parts.has('queue')) {
  const pending = createArrivalQueue()
  app.decorateReply('deadlineSeq', -1)
  app.addHook('onRequest', (_request, reply, done) => { reply.deadlineSeq = pending.add(reply, Date.now()); done() })
  app.addHook('onSend', (_request, reply, payload, done) => { pending.remove(reply.deadlineSeq); done(null, payload) })
}
if (parts.has('edges')) {
  app.addHook('onRequest', (_request, _reply, done) => done())
  app.addHook('preParsing', (_request, _reply, payload, done) => done(null, payload))
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.complete === false) reply.header('connection', 'close')
    done(null, payload)
  })
}
if (parts.has('headers')) {
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-content-type-options', 'nosniff')
    reply.header('cache-control', 'no-store')
    reply.header('x-request-id', request.id)
    done(null, payload)
  })
}

app.addHook('onRequest', async (request, reply) => {
  if (request.url === '/') return
  const header = request.headers.authorization
  let claims
  try {
    claims = header?.startsWith('Bearer ') ? verify(header.slice(7)) : undefined
  } catch {}
  if (claims?.role !== 'ROLE_USER' || !Number.isSafeInteger(claims.uid)) return reply.code(401).send({ message: 'Token inválido' })
  const user = await lookUp(claims.uid)
  if (!user) return reply.code(401).send({ message: 'Token inválido' })
  request.account = user
})

const record = { type: 'object', properties: { id: { type: 'integer' }, username: { type: 'string' }, email: { type: 'string' }, role: { type: 'string' } }, required: ['id', 'username', 'email', 'role'], additionalProperties: false }
const schema = parts.has('schema')
  ? { body: { type: 'object', properties: { email: { type: 'string' }, password: { type: 'string' } } }, response: { 200: record } }
  : undefined
app.get('/users/me', { schema, exposeHeadRoute: false }, async (request, reply) => {
  const email = request.body?.email
  if (email !== undefined && email.toLowerCase() !== request.account.email) return reply.code(403).send({ message: 'Acceso denegado' })
  return request.account
})
app.get('/', async () => 'ok')

await app.listen({ port: Number(env.PORT ?? 18092), host: '127.0.0.1' })
process.on('SIGTERM', () => { app.close().then(() => sql.end({ timeout: 1 })).finally(() => process.exit(0)) })
