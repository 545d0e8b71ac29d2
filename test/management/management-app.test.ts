import { execFile } from 'node:child_process'
import { STATUS_CODES } from 'node:http'
import { accessSync, constants } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pino from 'pino'
import t, { type Test } from 'tap'
import { sql } from 'drizzle-orm'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import { buildCheckedApp } from '../openapi/conformance.js'
import { RawConnection } from '../support/raw-http.js'
import { migrationsFolder } from '../../src/db/migrate.js'
import { buildManagementApp } from '../../src/management/management-app.js'
import { createMetrics } from '../../src/telemetry/metrics.js'
import { baseLoggerOptions } from '../../src/telemetry/logger.js'
import { build, captureLog, createTestDatabase, login, testConfig, testDatabases, uniqueUser } from '../helper.js'

type Json = Record<string, any>

// Cases that listen, count or change the journal build their own app: slow on a busy machine.
t.setTimeout(300_000)

for (const kind of testDatabases()) {
  t.test(`management listener on ${kind}`, async (t) => {
    /** An API, its metrics and management listener: a case that changes state or counts gets its own. */
    async function setup (t: Test) {
      const metrics = createMetrics()
      const api = await build(t, kind, { metrics, onHashTiming: metrics.observeHashTiming })
      const state = { shuttingDown: false }
      const management = await buildManagementApp({ api, isShuttingDown: () => state.shuttingDown })
      t.teardown(() => management.close())
      return { api, management, state }
    }
    /** The same, listening, its management listener logging to a captured log. */
    async function loggedSetup (t: Test) {
      const log = captureLog()
      const api = await build(t, kind)
      const management = await buildManagementApp({ api, isShuttingDown: () => false, logger: pino(baseLoggerOptions({ logLevel: 'info' }), log.stream) })
      t.teardown(() => management.close())
      await api.listen({ port: 0, host: '127.0.0.1' })
      return { log, api, management }
    }
    // The cases that only read what never changes (liveness, the documents) share one.
    const shared = await setup(t)

    t.test('GET /health/live answers 200 up, listening or not', async (t) => {
      const { management } = shared
      const response = await management.inject('/health/live')
      t.equal(response.statusCode, 200)
      t.strictSame(response.json(), { status: 'up' })
    })

    t.test('readiness is 503 until the API listens, 200 while it does, 503 from the start of shutdown', async (t) => {
      const { api, management, state } = await setup(t)
      const before = await management.inject('/health/ready')
      t.equal(before.statusCode, 503)
      t.strictSame(before.json(), { status: 'down', database: 'up', api: 'down' })

      await api.listen({ port: 0, host: '127.0.0.1' })
      const ready = await management.inject('/health/ready')
      t.equal(ready.statusCode, 200)
      t.strictSame(ready.json(), { status: 'up', database: 'up' })

      state.shuttingDown = true
      const draining = await management.inject('/health/ready')
      t.equal(draining.statusCode, 503)
      t.strictSame(draining.json(), { status: 'down', database: 'up', api: 'down' })
      const live = await management.inject('/health/live')
      t.equal(live.statusCode, 200, 'liveness stays up while draining')
      t.strictSame(live.json(), { status: 'up' })
    })

    t.test('readiness is 503 with migrations down while the database is behind the journal', async (t) => {
      const { api, management } = await setup(t)
      await api.listen({ port: 0, host: '127.0.0.1' })
      const ready = await management.inject('/health/ready')
      t.equal(ready.statusCode, 200)
      t.strictSame(ready.json(), { status: 'up', database: 'up' })
      const { db } = api.database
      const result = await db.execute(sql`select hash, created_at::text as created_at from drizzle.__drizzle_migrations order by id`) as unknown
      const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as { hash: string, created_at: string }[]
      t.equal(rows.length, readMigrationFiles({ migrationsFolder }).length, 'every migration in drizzle/ applied')
      await db.execute(sql`delete from drizzle.__drizzle_migrations`)
      try {
        const behind = await management.inject('/health/ready')
        t.equal(behind.statusCode, 503)
        t.strictSame(behind.json(), { status: 'down', database: 'up', migrations: 'down' })
      } finally {
        for (const row of rows) await db.execute(sql`insert into drizzle.__drizzle_migrations (hash, created_at) values (${row.hash}, ${row.created_at}::bigint)`)
      }
      const back = await management.inject('/health/ready')
      t.equal(back.statusCode, 200)
      t.strictSame(back.json(), { status: 'up', database: 'up' })
    })

    // A runtime role without SELECT on Drizzle's record kept an instance out of the balancer
    // for good, and nothing said why.
    t.test('readiness says once in the log why the record of migrations cannot be read', async (t) => {
      const { log, api, management } = await loggedSetup(t)
      const { db } = api.database
      const hide = async () => { await db.execute(sql`alter table drizzle.__drizzle_migrations rename to hidden_migrations`) }
      const show = async () => { await db.execute(sql`alter table drizzle.hidden_migrations rename to __drizzle_migrations`) }
      const probes = async (n: number) => {
        const answers = []
        for (let i = 0; i < n; i++) answers.push(await management.inject('/health/ready'))
        return answers.map((answer) => [answer.statusCode, answer.json()])
      }
      const down = [503, { status: 'down', database: 'up', migrations: 'down' }]
      const warnings = () => log.lines.filter((line) => line.level === 40).map((line) => [line.msg, line.err?.cause?.code ?? line.err?.code])
      const warning = ['readiness: the database\'s record of its migrations cannot be read; not ready until it can', '42P01']
      await hide()
      t.teardown(async () => { await show().catch(() => {}) })
      t.strictSame(await probes(3), [down, down, down])
      t.strictSame(warnings(), [warning], 'one line for three probes (once a minute)')
      await show()
      t.strictSame(await probes(1), [[200, { status: 'up', database: 'up' }]])
      await hide()
      t.strictSame(await probes(2), [down, down])
      t.strictSame(warnings(), [warning, warning], 'said again once it had been readable')
      await show()
    })

    // An outage's start and end were nowhere in the log: only each failed request's own line.
    t.test('readiness says when the database stops answering and when it answers again, once each', async (t) => {
      const { log, api, management } = await loggedSetup(t)
      const database = api.database as { ping: typeof api.database.ping }
      const { ping } = database
      t.teardown(() => { database.ping = ping })
      const probe = async () => (await management.inject('/health/ready')).statusCode
      t.strictSame([await probe()], [200])
      database.ping = async () => { throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }) }
      t.strictSame([await probe(), await probe(), await probe()], [503, 503, 503])
      database.ping = ping
      t.strictSame([await probe(), await probe()], [200, 200])
      t.strictSame(log.lines.map((line) => [line.level, line.msg, line.err?.code]), [
        [40, 'readiness: the database does not answer; not ready until it does', 'ECONNREFUSED'],
        [30, 'readiness: the database answers again', undefined]
      ])
    })

    t.test('GET /metrics: requests by route pattern and status, hash time, pool use, process metrics', async (t) => {
      const { api, management } = await setup(t)
      const user = uniqueUser('met')
      const signup = await api.inject({ method: 'POST', url: '/auth/signup', payload: user })
      t.equal(signup.statusCode, 201)
      const { id } = signup.json()
      t.strictSame(signup.json(), { id, username: user.username, email: user.email })
      t.equal(id, 3, 'the first account after the two seed accounts')
      const token = await login(api, user.email, user.password)
      const me = await api.inject({ url: '/users/me', headers: { authorization: `Bearer ${token}` } })
      t.equal(me.statusCode, 200)
      t.strictSame(me.json(), { id, username: user.username, email: user.email, role: 'ROLE_USER' })
      const unknown = await api.inject({ url: '/users/12345?secret=1', headers: { authorization: `Bearer ${token}` } })
      t.equal(unknown.statusCode, 404)
      t.strictSame(unknown.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
      const anonymous = await api.inject({ url: '/admin/users' })
      t.equal(anonymous.statusCode, 401)
      t.strictSame(anonymous.json(), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })

      const response = await management.inject('/metrics')
      t.equal(response.statusCode, 200)
      t.equal(response.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
      const text = response.body
      const sample = (line: string) => t.ok(text.split('\n').includes(line), line)
      sample('http_requests_total{method="POST",route="/auth/signup",status_code="201"} 1')
      sample('http_requests_total{method="POST",route="/auth/login",status_code="200"} 1')
      sample('http_requests_total{method="GET",route="/users/me",status_code="200"} 1')
      sample('http_requests_total{method="GET",route="<unmatched>",status_code="404"} 1')
      sample('http_requests_total{method="GET",route="/admin/users",status_code="401"} 1')
      sample('http_request_duration_seconds_count{method="POST",route="/auth/signup",status_code="201"} 1')
      t.notMatch(text, '/users/12345', 'a raw URL never becomes a label')
      // The two seed accounts and the sign-up were hashed; the login verified once.
      sample('password_hash_duration_seconds_count{operation="hash"} 3')
      sample('password_hash_duration_seconds_count{operation="verify"} 1')
      sample(`db_pool_max_connections ${kind === 'postgres' ? 10 : 1}`)
      sample('db_pool_queries_in_flight 0')
      sample('db_pool_queries_waiting 0')
      sample('db_pool_acquire_timeouts_total 0')
      for (const name of ['process_cpu_user_seconds_total', 'process_cpu_system_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds']) {
        t.match(text, new RegExp(`^${name} [0-9.e+]+$`, 'm'), name)
      }
    })

    t.test('GET /openapi.json is the OpenAPI 3.1 document of the four operations', async (t) => {
      const { management } = shared
      const response = await management.inject('/openapi.json')
      t.equal(response.statusCode, 200)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
      const document = response.json()
      checkOpenApi(t, document)
    })

    t.test('GET /docs serves the interactive page over the same document', async (t) => {
      const { management } = shared
      const page = await management.inject('/docs')
      t.equal(page.statusCode, 200)
      t.equal(page.headers['content-type'], 'text/html; charset=utf-8')
      t.match(page.body, /swagger-ui/i)
      const initializer = await management.inject('/docs/static/swagger-initializer.js')
      t.equal(initializer.statusCode, 200)
      const json = await management.inject('/docs/json')
      t.equal(json.statusCode, 200)
      t.strictSame(json.json(), (await management.inject('/openapi.json')).json())
    })

    // @fastify/swagger-ui sends its static/index.html to the page, but serves the folder's index,
    // the same stock file, at static/: a Swagger UI over no document, with an error.
    t.test('GET /docs/static/ leads to the page, as /docs/static/index.html does, not to the stock one', async (t) => {
      const { management } = shared
      for (const url of ['/docs/static/', '/docs/static/index.html']) {
        const response = await management.inject(url)
        t.strictSame([response.statusCode, response.headers.location, response.body], [302, '/docs/', ''], url)
      }
    })

    t.test('the management port has no API routes and needs no token; its 404 echoes nothing of the request', async (t) => {
      const { management } = shared
      // The last one does not decode (`%zz`): Fastify's own 400 for it quotes the URL.
      for (const url of ['/users/me', '/%3Cimg%20src=x%20onerror=alert(1)%3E', '/%3Cscript%3E%zz']) {
        const response = await management.inject(url)
        t.equal(response.statusCode, 404, url)
        t.strictSame(response.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }, url)
        t.strictSame([response.headers['content-type'], response.headers['x-content-type-options']], ['application/json; charset=utf-8', 'nosniff'], url)
      }
    })
  })

  // Fastify's own answer was English, without the contract's headers (CONTRACT §7: a request the
  // parser refuses gets the contract's body on every listener).
  t.test(`the management listener on ${kind} answers what the HTTP parser refuses in the contract's shape`, async (t) => {
    const log = captureLog()
    const api = await build(t, kind)
    const management = await buildManagementApp({ api, isShuttingDown: () => false, logger: pino(baseLoggerOptions({ logLevel: 'info' }), log.stream) })
    t.teardown(() => management.close())
    await management.listen({ port: 0, host: '127.0.0.1' })
    const { port } = management.server.address() as { port: number }
    for (const [request, status, message] of [
      ['GARBAGE / HTTP/1.1\r\n\r\n', 400, 'Petición no válida'],
      [`GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'Las cabeceras de la petición son demasiado grandes']
    ] as const) {
      const connection = await RawConnection.open(port)
      connection.send(request)
      await connection.until(() => connection.closed, 5000)
      const [response] = connection.responses()
      t.strictSame([response?.status, JSON.parse(response?.body ?? 'null')], [status, { statusCode: status, error: STATUS_CODES[status], message }])
      t.strictSame([response.headers['content-type'], response.headers['x-content-type-options'], response.headers['cache-control']], ['application/json; charset=utf-8', 'nosniff', 'no-store'])
    }
    t.strictSame(log.lines.filter((line) => line.statusCode !== undefined).map((line) => [line.msg, line.statusCode]), [['request refused by the HTTP parser', 400], ['request refused by the HTTP parser', 431]])
  })

  t.test(`readiness on ${kind} is 503 with database down when select 1 fails`, async (t) => {
    const { database } = await createTestDatabase(t, kind)
    const broken = { ...database, ping: async () => { throw new Error('connection refused') } }
    const api = await buildCheckedApp(testConfig(), { database: broken, seed: false })
    t.teardown(() => api.close())
    await api.listen({ port: 0, host: '127.0.0.1' })
    const management = await buildManagementApp({ api, isShuttingDown: () => false })
    t.teardown(() => management.close())
    const response = await management.inject('/health/ready')
    t.equal(response.statusCode, 503)
    t.strictSame(response.json(), { status: 'down', database: 'down' })
    const live = await management.inject('/health/live')
    t.equal(live.statusCode, 200, 'liveness never touches the database')
    t.strictSame(live.json(), { status: 'up' })
  })
}

/** Debian's chromium, when installed (`apt-get install -y chromium`); the /docs browser check needs it. */
function findChromium (): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    for (const name of ['chromium', 'chromium-browser']) {
      try {
        accessSync(join(dir, name), constants.X_OK)
        return join(dir, name)
      } catch {}
    }
  }
  return undefined
}

const chromium = findChromium()
t.test('/docs, opened in headless Chromium, shows the four operations', { skip: chromium ? false : 'chromium is not installed (apt-get install -y chromium): browser check of /docs skipped' }, async (t) => {
  const api = await build(t, 'pglite')
  const management = await buildManagementApp({ api, isShuttingDown: () => false })
  t.teardown(() => management.close())
  await management.listen({ port: 0, host: '127.0.0.1' })
  const { port } = management.server.address() as { port: number }
  // --dump-dom prints the page once its scripts ran and fetched the document (virtual time).
  const { stdout: dom } = await promisify(execFile)(chromium!, ['--headless', '--no-sandbox', '--disable-gpu', '--virtual-time-budget=15000', '--dump-dom', `http://127.0.0.1:${port}/docs`], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 })
  const operations = [...dom.matchAll(/class="opblock-summary-method">([A-Z]+)<[\s\S]*?data-path="([^"]+)"/g)].map(([, method, path]) => `${method} ${path}`)
  t.strictSame(operations, ['POST /auth/signup', 'POST /auth/login', 'GET /users/me', 'GET /admin/users'])
})

/** Structural checks of OpenAPI 3.1: version, the four operations, their schemas, bearer security, every $ref resolvable. */
function checkOpenApi (t: Test, document: Json): void {
  t.equal(document.openapi, '3.1.0')
  t.match(document.info, { title: String, version: String })
  t.strictSame(Object.keys(document.paths).sort(), ['/admin/users', '/auth/login', '/auth/signup', '/users/me'])
  const operations: [string, string, boolean][] = [['/auth/signup', 'post', false], ['/auth/login', 'post', false], ['/users/me', 'get', true], ['/admin/users', 'get', true]]
  for (const [path, method, secured] of operations) {
    t.strictSame(Object.keys(document.paths[path]), [method], `${path} has exactly one operation (no HEAD, no catch-all)`)
    const operation = document.paths[path][method]
    t.ok(Object.keys(operation.responses).length >= 2, `${method} ${path} documents its responses`)
    for (const [status, answer] of Object.entries<Json>(operation.responses)) {
      t.ok(/^[1-5][0-9]{2}$/.test(status), `${path} ${status} is a status code`)
      t.type(answer.description, 'string', `${path} ${status} has a description`)
    }
    if (secured) t.strictSame(operation.security, [{ bearerAuth: [] }], `${path} needs a bearer token`)
    else t.strictSame(operation.security, [], `${path} is public`)
  }
  t.strictSame(document.components.securitySchemes, { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The token of POST /auth/login.' } })

  const resolve = (schema: Json): Json => {
    if (typeof schema?.$ref !== 'string') return schema
    const target = schema.$ref.replace(/^#\//, '').split('/').reduce((node: Json | undefined, key: string) => node?.[key], document)
    t.ok(target, `${schema.$ref} resolves`)
    return resolve(target as Json)
  }
  const bodySchema = (path: string, method: string) => resolve(document.paths[path][method].requestBody.content['application/json'].schema)
  const answerSchema = (path: string, method: string, status: string) => resolve(document.paths[path][method].responses[status].content['application/json'].schema)

  t.match(bodySchema('/auth/signup', 'post'), {
    type: 'object',
    required: ['username', 'email', 'password'],
    properties: { username: { type: 'string', 'x-nfc-length': { minimum: 3, maximum: 20 }, minLength: 3, maxLength: 20 }, email: { type: 'string', format: 'email' }, password: { type: 'string', minLength: 8, maxLength: 16 } }
  })
  t.match(bodySchema('/auth/login', 'post'), { type: 'object', properties: { email: { type: 'string' }, password: { type: 'string' } } })
  t.strictSame(Object.keys(answerSchema('/auth/signup', 'post', '201').properties).sort(), ['email', 'id', 'username'])
  t.strictSame(Object.keys(answerSchema('/auth/login', 'post', '200').properties).sort(), ['email', 'id', 'token', 'username'])
  t.strictSame(Object.keys(answerSchema('/users/me', 'get', '200').properties).sort(), ['email', 'id', 'role', 'username'])
  const list = answerSchema('/admin/users', 'get', '200')
  t.equal(list.type, 'array')
  t.strictSame(Object.keys(resolve(list.items).properties).sort(), ['email', 'id', 'role', 'username'])
  t.match(answerSchema('/auth/login', 'post', '401'), { type: 'object', properties: { statusCode: {}, error: {}, message: {} } })

  // Every $ref anywhere in the document points at something.
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk)
    else if (node && typeof node === 'object') {
      if (typeof (node as Json).$ref === 'string') resolve(node as Json)
      Object.values(node).forEach(walk)
    }
  }
  walk(document)
}
