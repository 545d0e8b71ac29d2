import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { loadConfig } from '../src/config.js'
import { baseLoggerOptions, loggerOptions } from '../src/logger.js'
import { build, captureLog, seedAccounts, testDatabases } from './helper.js'

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

t.test('production lines still pending when the process exits are all written, in order', async (t) => {
  const source = (path: string) => JSON.stringify(new URL(path, import.meta.url).href)
  const script = `
    import pino from 'pino'
    import { loadConfig } from ${source('../src/config.ts')}
    import { loggerOptions } from ${source('../src/logger.ts')}
    const { stream, ...options } = loggerOptions(loadConfig({ APP_PROFILE: 'production', DATABASE_URL: 'postgres://db/x', JWT_SECRET: 'k'.repeat(16) + 'z'.repeat(16) }))
    const log = pino(options, stream)
    for (let n = 0; n < 2000; n++) log.info({ n }, 'line')
    process.exit(0)`
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { maxBuffer: 16 * 1024 * 1024 })
  const numbers = stdout.trim().split('\n').map((line) => JSON.parse(line).n)
  t.strictSame(numbers, Array.from({ length: 2000 }, (_, n) => n), 'no line lost, none out of order')
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
      t.strictSame(failed.json(), { statusCode: 401, error: 'Unauthorized', message: 'Credenciales inválidas' })
      const response = await app.inject({ method: 'POST', url: '/auth/login', headers: { 'x-request-id': 'login-1' }, payload: { email, password } })
      t.equal(response.statusCode, 200)
      const { token } = response.json()
      t.strictSame({ ...response.json(), token: 'x' }, { id: seedAccounts.user.id, token: 'x', username: seedAccounts.user.username, email })
      const me = await app.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}`, 'x-request-id': 'me-1' }, payload: { email, password } })
      t.equal(me.statusCode, 200)
      t.strictSame(me.json(), { id: seedAccounts.user.id, username: seedAccounts.user.username, email, role: seedAccounts.user.role })

      const text = log.raw.join('\n')
      t.notMatch(text, password, 'the password is in no log line')
      t.notMatch(text, 'Wrong9876x', 'nor the wrong one')
      t.notMatch(text, token, 'the token is in no log line')
      t.notMatch(text, token.split('.')[2], 'not even its signature')

      for (const [reqId, method, route, statusCode] of [['login-fail-1', 'POST', '/auth/login', 401], ['login-1', 'POST', '/auth/login', 200], ['me-1', 'GET', '/users/me', 200]] as const) {
        const completed = linesOf(reqId).filter((line) => line.msg === 'request completed')
        t.equal(completed.length, 1, `one request line for ${reqId}`)
        t.match(completed[0], { level: 30, reqId, method, route, statusCode, responseTime: Number })
        t.ok(completed[0].responseTime >= 0)
        t.notOk(completed[0].req || completed[0].res, 'no request or response dump')
      }
      t.notOk(log.lines.some((line) => line.msg === 'incoming request'), 'Fastify\'s own request lines are off')
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
        const response = await app.inject({ url: '/users/me', headers: incoming === undefined ? {} : { 'x-request-id': incoming } })
        t.equal(response.statusCode, 401)
        t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
        const echoed = response.headers['x-request-id'] as string
        if (kept) t.equal(echoed, incoming, 'kept')
        else t.match(echoed, UUID, `${JSON.stringify(incoming)} replaced`)
        const lines = linesOf(echoed)
        t.ok(lines.length >= 1, 'the request\'s lines carry its id')
        t.ok(lines.every((line) => line.reqId === echoed))
      }
    })

    t.test('an unmatched path is logged by its path, without the query string', async (t) => {
      const response = await app.inject({ url: '/no/such/path?token=abc123secret', headers: { 'x-request-id': 'unmatched-1' } })
      t.equal(response.statusCode, 401)
      t.strictSame(response.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
      const [line] = linesOf('unmatched-1').filter((l) => l.msg === 'request completed')
      t.match(line, { method: 'GET', route: '/no/such/path', statusCode: 401 })
      t.notMatch(log.raw.join('\n'), 'abc123secret')
    })
  })
}
