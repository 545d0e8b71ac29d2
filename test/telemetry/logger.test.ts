import { execFile, spawn } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'
import { promisify } from 'node:util'
import { sql } from 'drizzle-orm'
import pino from 'pino'
import t from 'tap'
import { errorCodes } from 'fastify'
import { loadConfig } from '../../src/config/index.js'
import { users } from '../../src/db/schema.js'
import { newUserRow } from '../../src/users/users-repository.js'
import { baseLoggerOptions, loggerOptions } from '../../src/telemetry/logger.js'
import { describeError, describeFailure } from '../../src/telemetry/error-description.js'
import { ServiceUnavailableError } from '../../src/http/errors.js'
import { AcquireTimeoutError, NotReadyError } from '../../src/db/pg-errors.js'
import { buildCheckedApp } from '../openapi/conformance.js'
import { openMigratedPglite } from '../../src/db/snapshot.js'
import { assertLoggedIn, build, captureLog, errorBodies, createTestDatabase, seedAccounts, testConfig, testDatabases } from '../helper.js'

type Line = Record<string, any>

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('the profile picks the log format: JSON with ISO time in production, pino-pretty in development', async (t) => {
  const production = loggerOptions(loadConfig({ APP_PROFILE: 'production', DATABASE_URL: 'postgres://db/x', JWT_SECRET: 'k'.repeat(16) + 'z'.repeat(16) })) as Line
  t.notOk(production.transport, 'production writes plain JSON lines')
  t.match(production.timestamp(), /^,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$/)
  const development = loggerOptions(loadConfig({ APP_PROFILE: 'development' })) as Line
  t.equal(development.transport.target, 'pino-pretty')
  t.equal(development.level, 'info')
})

/** A child process's script: the production logger as `log`, then `body`. */
function withProductionLog (body: string): string {
  const source = (path: string) => JSON.stringify(new URL(path, import.meta.url).href)
  return `
    import pino from 'pino'
    import { loadConfig } from ${source('../../src/config/index.ts')}
    import { loggerOptions, stdoutDestination } from ${source('../../src/telemetry/logger.ts')}
    const options = loggerOptions(loadConfig({ APP_PROFILE: 'production', DATABASE_URL: 'postgres://db/x', JWT_SECRET: 'k'.repeat(16) + 'z'.repeat(16) }))
    const log = pino(options, stdoutDestination())
    ${body}`
}

t.test('production lines still pending when the process exits are all written, in order', async (t) => {
  const script = withProductionLog(`
    for (let n = 0; n < 2000; n++) log.info({ n }, 'line')
    process.exit(0)`)
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { maxBuffer: 16 * 1024 * 1024 })
  const numbers = stdout.trim().split('\n').map((line) => JSON.parse(line).n)
  t.strictSame(numbers, Array.from({ length: 2000 }, (_, n) => n), 'no line lost, none out of order')
})

// A full disk under the log (ENOSPC) ended the process at once, uncaught, with every instance
// that shares the disk: the lines are lost, not the service.
t.test('a production log that cannot be written costs its lines, not the process; stderr says so once', async (t) => {
  const script = withProductionLog(`
    for (let n = 0; n < 20000; n++) log.info({ n }, 'line')
    await new Promise((resolve) => setTimeout(resolve, 600))
    for (let n = 0; n < 20000; n++) log.info({ n }, 'line')
    process.stderr.write('still running')`)
  const full = openSync('/dev/full', 'w')
  t.teardown(() => closeSync(full))
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', full, 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk) => { stderr += chunk })
  const code = await new Promise((resolve) => child.on('exit', resolve))
  t.equal(code, 0)
  t.match(stderr, /^log lines lost: stdout refused them \(ENOSPC\); the service goes on\nstill running$/)
})

const WITHHELD = '[withheld: database error]'

/** What a database call rejected with. */
const rejection = (promise: Promise<unknown>) => promise.then(() => { throw new Error('expected a failure') }, (error: unknown) => error)

for (const kind of testDatabases()) {
  t.test(`errors of the database (${kind}) are logged by type, code and constraint: no message, SQL, parameter or value`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const log = captureLog()
    const logger = pino(baseLoggerOptions({ logLevel: 'info' }), log.stream)
    const driverError = kind === 'pglite' ? 'DatabaseError' : 'PostgresError'

    const badCast = await rejection(database.db.execute(sql`select ${'secret.person@example.com'}::int`))
    const row = { username: 'leakyname', email: 'leaky.person@example.com', passwordHash: '$argon2id$v=19$m=19456,p=1,t=2$leak$leak' }
    await database.db.insert(users).values(newUserRow(row))
    const duplicate = await rejection(database.db.insert(users).values(newUserRow({ ...row, username: 'othername' })))
    logger.error({ err: badCast }, 'bad cast')
    logger.error({ err: duplicate }, 'duplicate')

    const [castLine, duplicateLine] = log.lines
    for (const line of [castLine, duplicateLine]) t.match(line.err.stack, /^ {4}at /, 'the stack frames are kept, without the message that heads them')
    const withoutStack = ({ stack, ...rest }: Record<string, unknown>) => rest
    t.strictSame(withoutStack(castLine.err), { type: 'DrizzleQueryError', message: WITHHELD, cause: { type: driverError, message: WITHHELD, code: '22P02' } })
    t.strictSame(withoutStack(duplicateLine.err), {
      type: 'DrizzleQueryError', message: WITHHELD, cause: { type: driverError, message: WITHHELD, code: '23505', constraint: 'users_email_unique' }
    })
    t.notMatch(log.text(), /secret\.person|leaky|leakyname|argon2|Failed query|select|insert|invalid input|duplicate key|Key \(/, 'nothing of the statement, its values or the server\'s text')
  })
}

t.test('other errors keep their message and stack; a cause from the database silences the whole chain', async (t) => {
  const plain = new TypeError('cannot read x of undefined')
  t.strictSame(describeError(plain, false), { type: 'TypeError', message: 'cannot read x of undefined' })
  t.equal(describeError(plain).stack, plain.stack)
  const system = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect', address: '127.0.0.1', port: 5432, secret: 'x' })
  t.strictSame(describeError(system, false), { type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED', errno: -111, syscall: 'connect', address: '127.0.0.1', port: 5432 }, 'only the known fields')
  const refused = Object.assign(new ServiceUnavailableError(), { reason: 'argon2 queue: no slot within 2000 ms' })
  t.strictSame(describeError(refused, false), { type: 'FastifyError', message: 'Servicio no disponible', code: 'UMS_SERVICE_UNAVAILABLE', statusCode: 503, reason: 'argon2 queue: no slot within 2000 ms' }, 'a 503 of our own says why')
  const wrapped = new Error('lookup of a@example.com failed', { cause: Object.assign(new Error('relation "users" does not exist'), { severity: 'ERROR', code: '42P01' }) })
  t.strictSame(describeError(wrapped, false), { type: 'Error', message: WITHHELD, cause: { type: 'Error', message: WITHHELD, code: '42P01' } })
  t.strictSame(describeError('a reason', false), { type: 'string', message: 'a reason' })
  t.strictSame(describeError({ email: 'a@example.com' }, false), { type: 'object', message: '[not an error]' })
  const loop = new Error('loop') as Error & { cause?: unknown }
  loop.cause = loop
  t.equal(JSON.stringify(describeError(loop)).split('"loop"').length - 1, 6, 'a looping cause chain ends')
})

t.test('an unexpected database failure answers 500 and its log line holds neither the SQL nor the e-mail looked up', async (t) => {
  const log = captureLog()
  const { database } = await openMigratedPglite()
  const app = await buildCheckedApp(testConfig(), { database, logger: { ...baseLoggerOptions({ logLevel: 'info' }), stream: log.stream } })
  t.teardown(() => app.close())
  await app.ready()
  // A closed PGlite fails every query with a plain Error, which Drizzle wraps with its SQL and parameters.
  await database.close()
  const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nobody.here@example.com', password: 'Secreto123' } })
  t.equal(response.statusCode, 500)
  t.strictSame(response.json(), { statusCode: 500, error: 'Internal Server Error', message: 'Error interno del servidor' })
  const [line] = log.lines.filter((l) => l.msg === 'unhandled error')
  t.strictSame(line && { type: line.err.type, message: line.err.message, cause: line.err.cause }, {
    type: 'DrizzleQueryError', message: WITHHELD, cause: { type: 'Error', message: WITHHELD }
  })
  t.notMatch(log.text(), /nobody\.here|Failed query|select|"users"/)
})

for (const kind of testDatabases()) {
  t.test(`request logs on ${kind}`, async (t) => {
    const log = captureLog()
    const app = await build(t, kind, { logger: { ...baseLoggerOptions({ logLevel: 'info' }), stream: log.stream } })
    const { email, password } = seedAccounts.user
    const linesOf = (reqId: string) => log.lines.filter((line) => line.reqId === reqId)

    t.test('a login and a /users/me call leave one line each, and neither the password nor the token', async (t) => {
      const failed = await app.inject({ method: 'POST', url: '/auth/login', headers: { 'x-request-id': 'login-fail-1' }, payload: { email, password: 'Wrong9876x' } })
      t.equal(failed.statusCode, 401)
      t.strictSame(failed.json(), errorBodies.badCredentials)
      const response = await app.inject({ method: 'POST', url: '/auth/login', headers: { 'x-request-id': 'login-1' }, payload: { email, password } })
      const token = assertLoggedIn(t, response, seedAccounts.user)
      const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}`, 'x-request-id': 'me-1' }, payload: { email, password } })
      t.equal(me.statusCode, 200)
      t.strictSame(me.json(), { id: seedAccounts.user.id, username: seedAccounts.user.username, email, role: seedAccounts.user.role })

      const text = log.raw.join('\n')
      t.notMatch(text, password, 'the password is in no log line')
      t.notMatch(text, 'Wrong9876x', 'nor the wrong one')
      t.notMatch(text, token, 'the token is in no log line')
      t.notMatch(text, token.split('.')[2], 'not even its signature')

      for (const [reqId, method, path, statusCode] of [['login-fail-1', 'POST', '/auth/login', 401], ['login-1', 'POST', '/auth/login', 200], ['me-1', 'GET', '/users/me', 200]] as const) {
        const completed = linesOf(reqId).filter((line) => line.msg === 'request completed')
        t.equal(completed.length, 1, `one request line for ${reqId}`)
        t.match(completed[0], { level: 30, reqId, method, path, statusCode, responseTime: Number })
        t.ok(completed[0].responseTime >= 0)
        t.notOk(completed[0].req || completed[0].res, 'no request or response dump')
        // The line skips redaction (request-log.ts): it holds these fields and no other.
        t.strictSame(Object.keys(completed[0]), ['level', 'time', 'pid', 'hostname', 'reqId', 'method', 'path', 'statusCode', 'responseTime', 'msg'])
      }
      t.notOk(log.lines.some((line) => line.msg === 'incoming request'), 'Fastify\'s own request lines are off')
    })

    t.test('a request that writes only its request line makes no pino child; one that logs makes one', async (t) => {
      const login = await app.inject({ method: 'POST', url: '/auth/login', payload: { email, password } })
      t.equal(login.statusCode, 200)
      const { token } = login.json()
      // Counts the children Fastify's childLoggerFactory asks of the app's logger from here on.
      let made = 0
      const child = app.log.child.bind(app.log)
      app.log.child = ((...args: Parameters<typeof child>) => { made++; return child(...args) }) as typeof app.log.child
      t.teardown(() => { app.log.child = child })
      const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}`, 'x-request-id': 'me-quiet' }, payload: { email, password } })
      t.strictSame([me.statusCode, me.json()], [200, { id: seedAccounts.user.id, username: seedAccounts.user.username, email, role: seedAccounts.user.role }])
      t.strictSame(linesOf('me-quiet').map((line) => line.msg), ['request completed'], 'its one line, the request line')
      t.equal(made, 0, 'no child for it')
      const failed = await app.inject({ method: 'POST', url: '/auth/login', headers: { 'x-request-id': 'login-loud' }, payload: { email, password: 'Wrong9876x' } })
      t.strictSame([failed.statusCode, failed.json()], [401, errorBodies.badCredentials])
      t.ok(linesOf('login-loud').some((line) => line.msg !== 'request completed'), 'a failed login logs a security event through its logger')
      t.equal(made, 1, 'and has its child')
    })

    t.test('anything that logs a secret by mistake gets it redacted', async (t) => {
      app.log.info({ password: 'Leak12345', token: 'eyLeak', body: { password: 'Leak12345' }, headers: { authorization: 'Bearer eyLeak' }, user: { passwordHash: '$argon2id$leak' } }, 'oops')
      const line = log.lines.find((l) => l.msg === 'oops')
      t.strictSame(line && { password: line.password, token: line.token, body: line.body, headers: line.headers, user: line.user }, {
        password: '[redacted]', token: '[redacted]', body: { password: '[redacted]' }, headers: { authorization: '[redacted]' }, user: { passwordHash: '[redacted]' }
      })
      t.notMatch(log.raw.join('\n'), /Leak12345|eyLeak|argon2id\$leak/)
    })

    t.test('request ids: a valid X-Request-Id is kept, echoed and logged; anything else gets a new UUID', async (t) => {
      const valid = 'abc.DEF_123-' + 'x'.repeat(52)
      t.equal(valid.length, 64)
      for (const [incoming, kept] of [[valid, true], ['x'.repeat(65), false], ['bad id', false], ['ñandú', false], [undefined, false]] as const) {
        const before = log.lines.length
        const response = await app.inject({ url: '/users/me', headers: incoming === undefined ? {} : { 'x-request-id': incoming } })
        t.equal(response.statusCode, 401)
        t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
        const echoed = response.headers['x-request-id'] as string
        if (kept) t.equal(echoed, incoming, 'kept')
        else t.match(echoed, UUID, `${JSON.stringify(incoming)} replaced`)
        // Every line the request wrote (its security event, its request line) carries the id.
        const written = log.lines.slice(before)
        t.strictSame(written.map((line) => [line.msg, line.reqId]), [['authz_fail', echoed], ['request completed', echoed]], 'the request\'s lines carry its id')
      }
    })

    t.test('an unmatched path is logged by its path, without the query string', async (t) => {
      const response = await app.inject({ url: '/no/such/path?token=abc123secret', headers: { 'x-request-id': 'unmatched-1' } })
      t.equal(response.statusCode, 401)
      t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
      const completed = linesOf('unmatched-1').filter((l) => l.msg === 'request completed')
      t.equal(completed.length, 1, 'one request line')
      const [line] = completed
      t.match(line, { method: 'GET', path: '/no/such/path', statusCode: 401 })
      t.notMatch(log.raw.join('\n'), 'abc123secret')
    })

    // CONTRACT §7 asks the path: the catch-all's pattern (/auth/*) named none.
    t.test('a path under a wildcard route is logged by its path, not the pattern', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/no-such-operation?x=1', headers: { 'x-request-id': 'wildcard-1' }, payload: {} })
      t.strictSame([response.statusCode, response.json()], [404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }])
      const completed = linesOf('wildcard-1').filter((l) => l.msg === 'request completed')
      t.equal(completed.length, 1, 'one request line')
      const [line] = completed
      t.match(line, { method: 'POST', path: '/auth/no-such-operation', statusCode: 404 })
    })

    t.test('an unmatched path\'s segments that may hold an e-mail are logged redacted (CONTRACT §7)', async (t) => {
      for (const [url, logged] of [['/zz/bob@example.com', '/zz/[redacted]'], ['/users/me/carol%40example.com/x', '/users/me/[redacted]/x'], ['/a%2F@b/c', '/[redacted]/c'],
        ['/zz/dan%2540example.com', '/zz/[redacted]'], ['/zz/eve%EF%BC%A0example.com', '/zz/[redacted]'], ['/zz/fay%ZZ%40example.com', '/zz/[redacted]']]) {
        const response = await app.inject({ url, headers: { 'x-request-id': 'unmatched-2' } })
        t.equal(response.statusCode, 401)
        t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
        const lines = linesOf('unmatched-2').filter((l) => l.msg === 'request completed')
        t.match(lines.at(-1), { method: 'GET', path: logged, statusCode: 401 }, url)
      }
      t.notMatch(log.raw.join('\n'), /example\.com/)
    })
  })
}

t.test('a database error says the server\'s message for the classes that quote no data (CONTRACT §7), never its detail', async (t) => {
  const server = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'ERROR', detail: 'Key (email)=(a@example.com)', query: 'insert into users …', parameters: ['a@example.com'] })
  const drizzle = (cause: Error) => Object.assign(new Error('Failed query: insert into users values ($1) params: a@example.com', { cause }), { query: 'insert …', params: ['a@example.com'] })
  for (const [code, message] of [['28000', 'role "app" does not exist'], ['3D000', 'database "users" does not exist'], ['25006', 'cannot execute INSERT in a read-only transaction'],
    ['08P01', 'unsupported startup parameter: statement_timeout'], ['57P01', 'terminating connection due to administrator command'], ['53300', 'sorry, too many clients already'],
    // Of class 42, the one code whose texts name only objects and privileges: a role without a grant.
    ['42501', 'permission denied for schema drizzle']]) {
    t.strictSame(describeError(drizzle(server(code, message)), false), { type: 'Error', message: WITHHELD, cause: { type: 'Error', message, code } }, code)
    t.equal(describeFailure(drizzle(server(code, message))), `Error ${code}: ${message}`)
  }
  for (const [code, message] of [['23505', 'duplicate key value violates unique constraint "users_email_unique"'], ['22P02', 'invalid input syntax for type integer: "a@example.com"'], ['42P01', 'relation "users" does not exist']]) {
    t.strictSame(describeError(drizzle(server(code, message)), false), { type: 'Error', message: WITHHELD, cause: { type: 'Error', message: WITHHELD, code } }, `${code} withheld`)
    t.equal(describeFailure(drizzle(server(code, message))), `Error ${code}: ${WITHHELD}`)
  }
  // postgres.js marks connection, DNS and TLS failures with the query's fields too: their texts name a host at most.
  const network = (code: string, message: string) => Object.assign(new Error(message), { code, query: 'select 1', parameters: [] })
  for (const [code, message] of [['ENOTFOUND', 'getaddrinfo ENOTFOUND db'], ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'], ['CONNECTION_CLOSED', 'write CONNECTION_CLOSED db:5432']]) {
    t.strictSame(describeError(network(code, message), false), { type: 'Error', message, code })
    t.equal(describeFailure(drizzle(network(code, message))), `Error ${code}: ${message}`)
  }
  // Why no connection could be had: a server that hung up or stayed silent before it was ready.
  for (const [hungUp, code, message] of [[true, 'UMS_DB_CLOSED_EARLY', 'db:5432 closed the connection before it was ready'], [false, 'UMS_DB_NO_STARTUP_ANSWER', 'no answer from db:5432 to the startup message']] as const) {
    const waited = drizzle(new AcquireTimeoutError(1000, new NotReadyError('db:5432', hungUp)))
    t.strictSame(describeError(waited, false).cause, { type: 'AcquireTimeoutError', message: 'no database connection within 1000 ms', code: 'UMS_DB_ACQUIRE_TIMEOUT', cause: { type: 'NotReadyError', message, code } }, `${code}: the host named`)
  }
})

// Fastify's own errors quote the request where it went wrong (its URL, query string and all),
// and pino writes a line's message from its error's own text when none is given, past the
// serializer: the query's e-mail reached the log twice.
t.test('errors that quote the request are logged by their code, and no line takes its message from an error\'s own text', async (t) => {
  const url = '/admin/users?email=carol%40example.com'
  const errors = [new errorCodes.FST_ERR_REP_ALREADY_SENT(url, 'GET'), new errorCodes.FST_ERR_BAD_URL(url), new errorCodes.FST_ERR_MAX_PARAM_LENGTH(url)]
  const withheld = '[withheld: quotes the request]'
  t.strictSame(errors.map((error) => describeError(error, false)), errors.map((error) => ({ type: 'FastifyError', message: withheld, code: error.code, statusCode: error.statusCode })).map(({ statusCode, ...rest }) => statusCode === undefined ? rest : { ...rest, statusCode }))
  t.equal(describeFailure(errors[0]), `FastifyError FST_ERR_REP_ALREADY_SENT: ${withheld}`)
  const log = captureLog()
  const logger = pino(baseLoggerOptions({ logLevel: 'info' }), log.stream)
  logger.warn({ err: errors[0] })
  logger.error(errors[1])
  logger.error(Object.assign(new Error('Failed query: select … params: a@example.com'), { query: 'select …', params: ['a@example.com'] }))
  logger.warn({ err: new Error('plain words') }, 'a message of its own')
  t.strictSame(log.lines.map((line) => [line.msg, line.err.message]), [
    [withheld, withheld], [withheld, withheld], ['[withheld: database error]', '[withheld: database error]'], ['a message of its own', 'plain words']
  ])
  t.notMatch(log.text(), /carol|example\.com/)
})
