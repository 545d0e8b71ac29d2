import { eq } from 'drizzle-orm'
import Fastify from 'fastify'
import t from 'tap'
import { trace } from '@opentelemetry/api'
import { createPasswordManager } from '../../src/users/password-manager.js'
import { users } from '../../src/db/schema.js'
import { baseLoggerOptions } from '../../src/telemetry/logger.js'
import { startTracing } from '../../src/telemetry/otel.js'
import { assertLoggedIn, assertSignedUp, build, captureLog, redisSkipReason, redisPrefix, seedAccounts, testConfig, testDatabases, TEST_REDIS_URL } from '../helper.js'
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js'
import { until } from '../deploy/processes.js'

// The SDK is process-wide (one tracer provider, one context manager), as in the service: this
// file starts it once, against a receiver of its own, and every test here shares it.
const receiver = await otlpReceiver(t)
const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: 'ums-under-test', OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_TRACES_SAMPLER: 'parentbased_always_on', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }
Object.assign(process.env, env)
const dropped: Array<[string, number]> = []
const redisSkip = await redisSkipReason()
const tracing = await startTracing({ config: testConfig(env).tracing!, onDropped: (reason, count) => dropped.push([reason, count]) })
t.teardown(() => tracing.shutdown())

const TOKEN_INVALID = { statusCode: 401, error: 'Unauthorized', message: 'Token inválido' }
const CALLER_SPAN = '00f067aa0ba902b7'

const byTrace = (traceId: string) => (spans: ReceivedSpan[]) => spans.filter((span) => span.traceId === traceId)

for (const [index, kind] of testDatabases().entries()) {
  // A trace id of its own for each database kind.
  const CALLER_TRACE = `${index}bf92f3577b34da6a3ce929d0e0e4736`
  t.test(`a login with a traceparent on ${kind}: one trace, the server span a child of the caller's, database and hash spans under it, the log lines joined`, async (t) => {
    const log = captureLog()
    const app = await build(t, kind, { tracing, logger: { ...baseLoggerOptions({ logLevel: 'info' }), stream: log.stream } })
    // Whatever starts from here on is the login's: the file's tests run one at a time.
    const sentAt = Date.now()
    const response = await app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
      payload: { email: seedAccounts.user.email, password: seedAccounts.user.password }
    })
    assertLoggedIn(t, response, seedAccounts.user)

    const received = await receiver.until((all) => byTrace(CALLER_TRACE)(all).some((span) => span.kind === 2))
    const spans = byTrace(CALLER_TRACE)(received)
    t.strictSame(received.filter((span) => span.startMs >= sentAt && span.traceId !== CALLER_TRACE).map((span) => span.name), [], 'one trace: the caller\'s')
    const server = spans.filter((span) => span.kind === 2)
    t.equal(server.length, 1, 'one server span')
    t.equal(server[0].parentSpanId, CALLER_SPAN, 'the server span is a child of the caller\'s span')
    t.equal(server[0].name, 'POST /auth/login', 'named by the route pattern')
    t.match(server[0].attributes, { 'http.route': '/auth/login', 'http.request.method': 'POST', 'http.response.status_code': 200, 'url.path': '/auth/login', 'url.scheme': 'http', 'request.id': response.headers['x-request-id'] })

    // Every other span of the trace descends from the server span.
    const ids = new Map(spans.map((span) => [span.spanId, span]))
    const descends = (span: ReceivedSpan): boolean => span.parentSpanId === server[0].spanId || (span.parentSpanId !== undefined && ids.has(span.parentSpanId) && descends(ids.get(span.parentSpanId)!))
    t.strictSame(spans.filter((span) => span !== server[0] && !descends(span)).map((span) => span.name), [], 'all under the server span')

    const statement = spans.find((span) => span.name === 'SELECT users_by_email')
    t.match(statement?.attributes, { 'db.system': 'postgresql', 'db.operation': 'SELECT', 'db.statement.name': 'users_by_email' }, 'the look-up by e-mail has its span')
    t.equal(statement?.kind, 3, 'a client span: a call to the database (OTLP SPAN_KIND_CLIENT)')
    const hash = spans.find((span) => span.name === 'argon2 verify')
    t.ok(hash, 'the password check has its span')
    t.type(hash?.attributes['hash.queue_wait_ms'], 'number', 'with its wait for a hashing slot')
    t.type(hash?.attributes['hash.duration_ms'], 'number', 'and its hashing time')
    t.equal(statement?.parentSpanId, server[0].spanId, 'a child of the server span')
    t.equal(hash?.parentSpanId, server[0].spanId, 'as is the hash\'s')
    t.strictSame(spans.filter((span) => span.name.startsWith('handler - ')).map((span) => span.name), [], 'no span for the route handler (its cost: docs/performance.md)')
    t.strictSame(spans.filter((span) => /^(onRequest|preHandler|onSend|onResponse) - /.test(span.name)).map((span) => span.name), [], 'no span per hook (their cost: docs/performance.md)')

    const requestLines = log.lines.filter((line) => line.reqId === response.headers['x-request-id'])
    t.ok(requestLines.length >= 2, 'the request logged its login and its completion')
    t.strictSame([...new Set(requestLines.map((line) => `${line.trace_id} ${line.span_id}`))], [`${CALLER_TRACE} ${server[0].spanId}`], 'every line of the request names its trace and server span')
  })

}
// HTTP's semantic conventions: a server span whose status is 5xx says so in error.type; 4xx is the client's error.
t.test('a 5xx server span names its status in error.type; a 4xx has none', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(tracing.plugin)
  app.get('/down', async (_request, reply) => reply.code(503).send({ down: true }))
  app.get('/thrown', async () => { throw new Error('boom') })
  app.get('/refused', async (_request, reply) => reply.code(409).send({ taken: true }))
  const traceId = '5d0e3c4c1a3b4f7e8d9c0b1a2f3e4d5c'
  const statuses = []
  for (const url of ['/down', '/thrown', '/refused']) statuses.push((await app.inject({ url, headers: { traceparent: `00-${traceId}-${CALLER_SPAN}-01` } })).statusCode)
  t.strictSame(statuses, [503, 500, 409])
  const spans = byTrace(traceId)(await receiver.until((all) => byTrace(traceId)(all).length === 3))
  const attributes = (route: string) => spans.find((span) => span.attributes['http.route'] === route)?.attributes
  t.strictSame(['/down', '/thrown', '/refused'].map((route) => [attributes(route)?.['http.response.status_code'], attributes(route)?.['error.type']]), [[503, '503'], [500, '500'], [409, undefined]])
})

t.test('without a traceparent: a trace of its own, the server span a root', async (t) => {
  const app = await build(t, 'pglite', { tracing })
  const earlierTraces = new Set(receiver.spans.map((span) => span.traceId))
  const response = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: 'Bearer nope' } })
  t.strictSame([response.statusCode, response.json()], [401, TOKEN_INVALID])
  const requestId = response.headers['x-request-id']
  const [server] = (await receiver.until((all) => all.some((span) => span.attributes['request.id'] === requestId))).filter((span) => span.attributes['request.id'] === requestId)
  t.equal(server.parentSpanId, undefined)
  t.notOk(earlierTraces.has(server.traceId), 'a trace id no earlier request had')
  t.equal(server.name, 'GET /users/me')
  t.equal(server.attributes['http.response.status_code'], 401)
  // HTTP's semantic conventions: a server span's 4xx is the client's error, its status unset.
  t.equal(server.status.code ?? 0, 0, 'a 401 leaves the server span\'s status unset')
})

// Issue 26: a client's traceparent is only a parent id. Its tracestate is whatever the client
// wrote (an e-mail, a token), and the SDK put it on every span of the request.
t.test('a caller\'s tracestate is not carried: the spans keep the parent id and nothing else of the caller\'s', async (t) => {
  const app = await build(t, 'pglite', { tracing })
  const traceId = '6bf92f3577b34da6a3ce929d0e0e4736'
  const response = await app.inject({ method: 'GET', url: '/users/me', headers: { traceparent: `00-${traceId}-${CALLER_SPAN}-01`, tracestate: 'ums=carol@example.com,vendor=tok42', authorization: 'Bearer nope' } })
  t.strictSame([response.statusCode, response.json()], [401, TOKEN_INVALID])
  const [server] = (await receiver.until((all) => all.some((span) => span.traceId === traceId))).filter((span) => span.traceId === traceId)
  t.strictSame([server.name, server.parentSpanId], ['GET /users/me', CALLER_SPAN], 'the caller\'s span is still the parent')
  t.notOk(server.raw.includes('carol@example.com') || server.raw.includes('tok42'), 'no trace state of the caller\'s in the export')
})

t.test('a caller\'s traceparent that says "not sampled": the default sampler records nothing of the request', async (t) => {
  const app = await build(t, 'pglite', { tracing })
  const traceId = '5bf92f3577b34da6a3ce929d0e0e4736'
  const unsampled = await app.inject({ method: 'GET', url: '/users/me', headers: { traceparent: `00-${traceId}-${CALLER_SPAN}-00`, authorization: 'Bearer nope' } })
  t.strictSame([unsampled.statusCode, unsampled.json()], [401, TOKEN_INVALID])
  // A sampled request after it: once its span is in, the one before would have been too.
  const sampled = await app.inject({ method: 'GET', url: '/users/me', headers: { authorization: 'Bearer nope' } })
  t.strictSame([sampled.statusCode, sampled.json()], [401, TOKEN_INVALID])
  await receiver.until((all) => all.some((span) => span.attributes['request.id'] === sampled.headers['x-request-id']))
  t.strictSame(receiver.spans.filter((span) => span.traceId === traceId).map((span) => span.name), [])
})

t.test('no password, hash, e-mail, token or query parameter in any span or attribute', async (t) => {
  const app = await build(t, 'pglite', { tracing })
  const secrets = {
    email: 'secret.person@example.com',
    password: 'Sup3rSecretPass',
    query: 'querysecret42'
  }
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  const account = { username: 'tracedone', email: secrets.email }
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', headers: { traceparent }, payload: { ...account, password: secrets.password } }), account)
  const [{ id }] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, secrets.email))
  const login = await app.inject({ method: 'POST', url: `/auth/login?token=${secrets.query}`, headers: { traceparent }, payload: { email: secrets.email, password: secrets.password } })
  const token = assertLoggedIn(t, login, { id, ...account })
  const stored = (await app.inject({ method: 'GET', url: `/users/me?email=${encodeURIComponent(secrets.email)}`, headers: { traceparent, authorization: `Bearer ${token}` }, payload: { email: secrets.email } }))
  t.strictSame([stored.statusCode, stored.json()], [200, { id, ...account, role: 'ROLE_USER' }])
  // Failures too: a duplicate (23505 in the driver), a body that is not JSON, an unknown path with an e-mail in it.
  const duplicate = await app.inject({ method: 'POST', url: '/auth/signup', headers: { traceparent }, payload: { username: 'tracedtwo', email: secrets.email, password: secrets.password } })
  t.strictSame([duplicate.statusCode, duplicate.json()], [409, { email: 'El email ya está registrado' }])
  const malformed = await app.inject({ method: 'POST', url: '/auth/login', headers: { traceparent, 'content-type': 'application/json' }, payload: `{"email":"${secrets.email}","password":` })
  t.strictSame([malformed.statusCode, malformed.json()], [400, { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición no es un JSON válido' }])
  const unknown = await app.inject({ method: 'GET', url: `/users/${secrets.email}`, headers: { traceparent, authorization: `Bearer ${token}` } })
  t.strictSame([unknown.statusCode, unknown.json()], [404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }])

  const spans = await receiver.until((all) => all.filter((span) => span.traceId === '0af7651916cd43dd8448eb211c80319c' && span.kind === 2).length === 6)
  const exported = [...new Set(spans.filter((span) => span.traceId === '0af7651916cd43dd8448eb211c80319c').map((span) => span.raw))].join('\n')
  const [row] = await app.database.db.select({ passwordHash: users.passwordHash }).from(users).where(eq(users.email, secrets.email))
  t.ok(row.passwordHash.startsWith('$argon2id$'), 'the hash to look for')
  for (const [what, secret] of [...Object.entries(secrets), ['e-mail, as stored', secrets.email.toLowerCase()], ['hash', row.passwordHash], ['token', token], ['token signature', token.split('.')[2]]]) {
    t.notOk(exported.includes(secret), `no ${what} in the exported spans`)
  }
  const failed = spans.filter((span) => span.traceId === '0af7651916cd43dd8448eb211c80319c' && span.status.code === 2)
  t.ok(failed.length > 0, 'the failures are recorded')
  t.ok(failed.every((span) => span.status.message === undefined || span.status.message === ''), 'with no message')
  const insert = spans.find((span) => span.name === 'INSERT users_insert' && span.status.code === 2)
  t.match(insert?.attributes['error.type'], /^\w+ 23505$/, 'the duplicate\'s insert says its class and SQLSTATE')
  const unmatched = spans.find((span) => span.kind === 2 && span.attributes['http.response.status_code'] === 404)
  t.equal(unmatched?.name, 'GET', 'an unmatched path names no path')
  t.equal(unmatched?.attributes['url.path'], '<unmatched>')
  t.strictSame(dropped.filter(([, count]) => count > 0), [], 'nothing dropped while the collector takes every export')
})

t.test('the limits\' calls to Redis have spans of their own, named, without their keys', { skip: redisSkip }, async (t) => {
  const limitsKeyPrefix = redisPrefix(t)
  const app = await build(t, 'pglite', { tracing, limitsKeyPrefix, env: { RATE_LIMITS: 'on', REDIS_URL: TEST_REDIS_URL } })
  // Counting goes to Redis once its connection is up and the catch-up ran: on a busy machine, after the app is ready.
  await until('counting shared', () => app.limitsCounting?.isShared() === true, 10_000)
  const traceId = 'e3b0c44298fc1c149afbf4c8996fb924'
  const headers = { traceparent: `00-${traceId}-${CALLER_SPAN}-01` }
  const account = { username: 'redistraced', email: 'redis.traced@example.com' }
  await assertSignedUp(t, app, await app.inject({ method: 'POST', url: '/auth/signup', headers, payload: { ...account, password: 'Secreto123' } }), account)
  const [{ id }] = await app.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email))
  assertLoggedIn(t, await app.inject({ method: 'POST', url: '/auth/login', headers, payload: { email: account.email, password: 'Secreto123' } }), { id, ...account })
  const names = ['redis signup_count', 'redis login_take', 'redis login_finish']
  const spans = byTrace(traceId)(await receiver.until((all) => names.every((name) => byTrace(traceId)(all).some((span) => span.name === name))))
  for (const name of names) {
    const span = spans.find((candidate) => candidate.name === name)!
    t.strictSame([span.kind, span.attributes], [3, { 'db.system': 'redis', 'db.operation': name.slice('redis '.length) }], `${name}: a client span, the operation alone`)
  }
  const exported = [...new Set(spans.map((span) => span.raw))].join('\n')
  t.notOk(exported.includes(limitsKeyPrefix), 'no key of the limits in the spans')
  t.notOk(exported.includes('redis.traced@example.com'), 'nor the e-mail')
})

// The wait for a hashing slot matters most where it ended in a refusal (503): those spans had
// only their error, the wait nowhere but in their length.
t.test('a hash refused a slot still has its queue wait on its span', async (t) => {
  const manager = createPasswordManager({ cost: { memoryCost: 1024, timeCost: 1, parallelism: 1 }, concurrency: 1 })
  const stored = await manager.hash('Secreto123')
  const traceId = await trace.getTracer('test').startActiveSpan('hash flood', async (parent) => {
    // One running, 64 waiting (the queue's bound): the rest are refused at once.
    await Promise.allSettled(Array.from({ length: 70 }, () => manager.checkLogin('Secreto123', async () => ({ passwordHash: stored }))))
    parent.end()
    return parent.spanContext().traceId
  })
  const spans = byTrace(traceId)(await receiver.until((all) => byTrace(traceId)(all).filter((span) => span.name === 'argon2 verify').length === 70))
  const refused = spans.filter((span) => span.name === 'argon2 verify' && span.attributes['error.type'] !== undefined)
  t.ok(refused.length >= 5, `${refused.length} refused`)
  t.strictSame(refused.filter((span) => typeof span.attributes['hash.queue_wait_ms'] !== 'number').length, 0, 'each with its queue wait')
})
