import type { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { baseLoggerOptions } from '../../src/telemetry/logger.js'
import { build, captureLog, login, seedAccounts } from '../helper.js'
import { RawConnection, type RawResponse } from '../support/raw-http.js'

// Slow-header and slow-body cases wait for the server's own timeouts (5 and 10 s).
t.setTimeout(180_000)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const JSON_TYPE = 'application/json; charset=utf-8'

/** The API on PGlite, listening on a free port, with its log captured and every server-side socket kept. */
async function listening (t: Test) {
  const log = captureLog()
  const app = await build(t, 'pglite', { logger: { ...baseLoggerOptions({ logLevel: 'info' }), stream: log.stream } })
  const sockets: Socket[] = []
  app.server.on('connection', (socket: Socket) => sockets.push(socket))
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const connect = async () => {
    const connection = await RawConnection.open(port)
    t.teardown(() => connection.close())
    return connection
  }
  return { app, log, sockets, connect }
}

/** How many answers `http_requests_total` counted for a method, route and status. */
async function counted (app: { metrics: { registry: { getSingleMetricAsString (name: string): Promise<string> } } }, method: string, route: string, status: number) {
  const text = await app.metrics.registry.getSingleMetricAsString('http_requests_total')
  const line = text.split('\n').find((l) => l.startsWith(`http_requests_total{method="${method}",route="${route}",status_code="${status}"}`))
  return Number(line?.split(' ').at(-1) ?? 0)
}

/** The contract's headers on an error answer (CONTRACT §4), and nothing of the request echoed. */
function assertContractHeaders (t: Test, response: RawResponse) {
  t.equal(response.headers['content-type'], JSON_TYPE)
  t.equal(response.headers['x-content-type-options'], 'nosniff')
  t.equal(response.headers['cache-control'], 'no-store')
  t.match(response.headers['x-request-id'], UUID)
}

const request = (head: string, headers: Record<string, string | number> = {}) =>
  `${head} HTTP/1.1\r\nHost: localhost\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`

t.test('answers sent before the body was read close the connection instead of draining it', async (t) => {
  const { sockets, connect } = await listening(t)

  t.test('10 GB announced behind a request without a token: 401, then the connection closes having read a few KB', async (t) => {
    const connection = await connect()
    connection.send(request('GET /users/me', { 'content-type': 'application/json', 'content-length': 10_000_000_000 }))
    // The client keeps pushing the body as fast as the connection takes it.
    const chunk = Buffer.alloc(16 * 1024, 0x20)
    const pump = () => { while (connection.send(chunk)); }
    connection.socket.on('drain', pump)
    pump()
    const closed = await connection.until(() => connection.closed, 5000)
    t.ok(closed, `the connection closed (${connection.closedAt! - connection.openedAt} ms)`)
    const [response] = connection.responses()
    t.equal(response?.status, 401)
    t.strictSame(JSON.parse(response.body), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
    t.equal(response.headers.connection, 'close')
    const read = sockets.at(-1)!.bytesRead
    t.ok(read < 256 * 1024, `the server read ${read} bytes`)
  })

  t.test('an error answer to a request without a body keeps the connection alive', async (t) => {
    const connection = await connect()
    connection.send(request('GET /users/me') + request('GET /admin/users'))
    await connection.until(() => connection.responses().length === 2, 5000)
    const responses = connection.responses()
    t.strictSame(responses.map((r) => [r.status, r.headers.connection, JSON.parse(r.body)]), [
      [401, 'keep-alive', { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }],
      [401, 'keep-alive', { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }]
    ], 'both answered on the one connection')
    t.notOk(connection.closed)
  })
})

t.test('Expect: 100-continue is answered only once the token and the route are known good', async (t) => {
  const { app, connect } = await listening(t)
  const userToken = await login(app, seedAccounts.user.email, seedAccounts.user.password)
  const adminToken = await login(app, seedAccounts.admin.email, seedAccounts.admin.password)
  const body = JSON.stringify({ email: seedAccounts.user.email })
  const announce = (head: string, headers: Record<string, string> = {}) =>
    request(head, { ...headers, 'content-type': 'application/json', 'content-length': body.length, expect: '100-continue' })

  const refusals = [
    ['no token', announce('GET /users/me'), 401, { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }],
    ['the wrong role', announce('GET /users/me', { authorization: `Bearer ${adminToken}` }), 403, { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' }],
    ['an unknown path', announce('POST /nothing/here', { authorization: `Bearer ${userToken}` }), 404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }],
    ['an unknown path under /auth/', announce('POST /auth/nothing'), 404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }]
  ] as const
  for (const [name, text, status, expected] of refusals) {
    t.test(`${name}: the final answer comes at once, without 100 Continue, and the connection closes`, async (t) => {
      const connection = await connect()
      connection.send(text)
      t.ok(await connection.until(() => connection.closed, 5000), 'closed: the body never came')
      const responses = connection.responses()
      t.strictSame(responses.map((r) => r.status), [status])
      t.strictSame(JSON.parse(responses[0].body), expected)
      assertContractHeaders(t, responses[0])
    })
  }

  const signup = JSON.stringify({ username: 'cont1', email: 'cont1@example.com', password: 'Secreto123' })
  const accepted = [
    ['the own record with a valid token', announce('GET /users/me', { authorization: `Bearer ${userToken}` }), body, 200,
      { id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER' }],
    ['a sign-up, which needs no token', request('POST /auth/signup', { 'content-type': 'application/json', 'content-length': signup.length, expect: '100-continue' }),
      signup, 201, { id: 3, username: 'cont1', email: 'cont1@example.com' }]
  ] as const
  for (const [name, text, payload, status, expected] of accepted) {
    t.test(`${name}: 100 Continue, then the body is read and answered`, async (t) => {
      const connection = await connect()
      connection.send(text)
      await connection.until(() => connection.responses().length === 1, 5000)
      t.strictSame(connection.responses().map((r) => r.status), [100], 'told to go on')
      connection.send(payload)
      await connection.until(() => connection.responses().length === 2, 5000)
      const [, final] = connection.responses()
      t.equal(final.status, status)
      t.strictSame(JSON.parse(final.body), expected)
    })
  }

  t.test('another expectation is ignored, and the request is answered as usual', async (t) => {
    const connection = await connect()
    connection.send(request('GET /users/me', { expect: 'something-else' }))
    await connection.until(() => connection.responses().length === 1, 5000)
    const [response] = connection.responses()
    t.equal(response.status, 401)
    t.strictSame(JSON.parse(response.body), { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
    assertContractHeaders(t, response)
  })
})

t.test('slow clients get 408 within a second of the header (5 s) and request (10 s) timeouts', async (t) => {
  const { app, connect, log } = await listening(t)
  const expected = { statusCode: 408, error: 'Request Timeout', message: 'La petición tardó demasiado en llegar' }

  // Node checks the deadlines every half second: an answer comes within 0.5 s of each, plus the scheduler's noise.
  const cases = [
    // Slowloris: the headers never end.
    ['headers', 'GET /users/me HTTP/1.1\r\nHost: localhost\r\n', 'x-slow: a\r\n', 5000, 6250],
    // The headers came, the body trickles.
    ['body', request('POST /auth/signup', { 'content-type': 'application/json', 'content-length': 100 }) + '{"username":', ' ', 10_000, 11_250]
  ] as const
  // Both at once: each waits out its own timer, so together they take the longer one.
  await Promise.all(cases.map(async ([what, start, trickle, fromMs, toMs]) => {
    const connection = await connect()
    connection.send(start)
    const timer = setInterval(() => connection.send(trickle), 500)
    t.teardown(() => clearInterval(timer))
    t.ok(await connection.until(() => connection.closed, toMs + 2000), `slow ${what}: closed`)
    clearInterval(timer)
    const elapsed = connection.closedAt! - connection.openedAt
    t.ok(elapsed >= fromMs - 100 && elapsed <= toMs, `slow ${what}: answered after ${elapsed} ms`)
    const responses = connection.responses()
    t.strictSame(responses.map((r) => r.status), [408], `slow ${what}: one 408`)
    t.strictSame(JSON.parse(responses[0].body), expected, `slow ${what}: the contract's body`)
    assertContractHeaders(t, responses[0])
    t.equal(responses[0].headers.connection, 'close', `slow ${what}: connection close`)
    // Once the headers came, the log line names the request's method and path too (CONTRACT §7).
    const [line] = log.lines.filter((l) => l.reqId === responses[0].headers['x-request-id'])
    const named = what === 'body' ? { method: 'POST', path: '/auth/signup' } : {}
    t.strictSame({ msg: line?.msg, method: line?.method, path: line?.path, statusCode: line?.statusCode },
      { msg: 'request refused by the HTTP parser', method: undefined, path: undefined, ...named, statusCode: 408 }, `slow ${what}: its log line`)
  }))
  // In the metrics too, the trickling body counts under its route; the unfinished headers apart.
  t.equal(await counted(app, 'POST', '/auth/signup', 408), 1, 'the slow body counted under its route')
  t.equal(await counted(app, '<unparsed>', '<unmatched>', 408), 1, 'the slow headers counted apart')
  // Their time is not known: a 0 s sample would pull the latency histogram down (a 10 s wait in its 5 ms bucket).
  const durations = await app.metrics.registry.getSingleMetricAsString('http_request_duration_seconds')
  t.strictSame(durations.split('\n').filter((l) => /status_code="408"/.test(l)), [], 'and left out of the latency histogram')
})

t.test('answers outside the request pipeline have the contract\'s shape, headers, log line and metrics, and echo nothing', async (t) => {
  const { app, log, connect } = await listening(t)
  const userToken = await login(app, seedAccounts.user.email, seedAccounts.user.password)

  async function exchange (t: Test, text: string) {
    const connection = await connect()
    connection.send(text)
    await connection.until(() => connection.responses().length === 1 || connection.closed, 5000)
    const [response] = connection.responses()
    t.ok(response, 'an answer came')
    assertContractHeaders(t, response)
    // The request id is a random UUID (asserted above), which may hold "aaaa" by chance.
    const { 'x-request-id': _id, ...headers } = response.headers
    t.notMatch(response.body + JSON.stringify(headers), /zz|script|Bad-Header|FOO|aaaa/i, 'nothing of the request is echoed')
    return { response, body: JSON.parse(response.body), connection }
  }

  t.test('a malformed percent-encoding without a token: 401, as any unknown path (SPEC rule 9)', async (t) => {
    const { response, body } = await exchange(t, request('GET /admin/%zz<script>alert(1)</script>'))
    t.equal(response.status, 401)
    t.strictSame(body, { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
    t.equal(response.headers['www-authenticate'], 'Bearer')
    const lines = log.lines.filter((line) => line.reqId === response.headers['x-request-id'] && line.msg === 'request completed')
    t.equal(lines.length, 1, 'one request line')
    t.match(lines[0], { method: 'GET', statusCode: 401 })
    t.equal(await counted(app, 'GET', '<unmatched>', 401), 1, 'counted')
  })

  t.test('with a valid token: 404; under /auth/: 404 without one', async (t) => {
    const withToken = await exchange(t, request('GET /users/%zz', { authorization: `Bearer ${userToken}` }))
    t.equal(withToken.response.status, 404)
    t.strictSame(withToken.body, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
    const underAuth = await exchange(t, request('POST /auth/%c0%zz'))
    t.equal(underAuth.response.status, 404)
    t.strictSame(underAuth.body, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
  })

  t.test('a body the parser refuses on a path that reads as a route pattern (/auth/*x): 400, and the instance serves on', async (t) => {
    const before = await counted(app, 'POST', '<unmatched>', 400)
    const { response, body } = await exchange(t, request('POST /auth/*x', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }) + 'ZZ\r\n')
    t.equal(response.status, 400)
    t.strictSame(body, { statusCode: 400, error: 'Bad Request', message: 'Petición no válida' })
    t.equal(await counted(app, 'POST', '<unmatched>', 400), before + 1, 'counted under its method, as no route')
    const next = await exchange(t, request('GET /users/me'))
    t.equal(next.response.status, 401)
    t.strictSame(next.body, { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' })
  })

  t.test('an HTTP/1.1 request without Host (RFC 9112 §3.2): 400 in the contract\'s shape, logged, and the connection closed', async (t) => {
    const { response, body, connection } = await exchange(t, `GET /users/me HTTP/1.1\r\nAuthorization: Bearer ${userToken}\r\n\r\n`)
    t.strictSame([response.status, body], [400, { statusCode: 400, error: 'Bad Request', message: 'Petición no válida' }])
    t.equal(response.headers.connection, 'close')
    t.ok(await connection.until(() => connection.closed, 2000), 'closed')
    const lines = log.lines.filter((line) => line.reqId === response.headers['x-request-id'] && line.msg === 'request completed')
    t.equal(lines.length, 1, 'one request line')
    t.match(lines[0], { method: 'GET', statusCode: 400 })
  })

  t.test('Host sent twice or not a host (RFC 9112 §3.2): 400 in the contract\'s shape, the connection closed', async (t) => {
    for (const host of ['Host: a\r\nHost: b', 'Host: a b', 'Host: [::1', 'Host: a/b', 'Host: a:80:80', 'Host: [zz]', 'Host: a%zz']) {
      const { response, body, connection } = await exchange(t, `GET /users/me HTTP/1.1\r\n${host}\r\nAuthorization: Bearer ${userToken}\r\n\r\n`)
      t.strictSame([response.status, body, response.headers.connection], [400, { statusCode: 400, error: 'Bad Request', message: 'Petición no válida' }, 'close'], JSON.stringify(host))
      t.ok(await connection.until(() => connection.closed, 2000), `${JSON.stringify(host)}: closed`)
    }
    // Any host's form is served: a name with a port, IPv4, an IP literal, and the empty value RFC 9112 allows.
    for (const host of ['Host: api.example.com:8080', 'Host: 10.0.0.5', 'Host: [::1]:80', 'Host: [fe80::1%25eth0]', 'Host: [v1.fe80::a+en1]', 'Host: caf%C3%A9.example', 'Host: ']) {
      const { response, body } = await exchange(t, `GET /users/me HTTP/1.1\r\n${host}\r\nAuthorization: Bearer ${userToken}\r\n\r\n`)
      t.strictSame([response.status, body], [200, { id: seedAccounts.user.id, username: seedAccounts.user.username, email: seedAccounts.user.email, role: 'ROLE_USER' }], JSON.stringify(host))
    }
  })

  // Fastify runs a parser whenever a Content-Type is sent: a length of 0, however written, is no body.
  t.test('a sign-up whose Content-Type is not JSON and whose Content-Length is 00 has an absent body: 400', async (t) => {
    const { response, body } = await exchange(t, 'POST /auth/signup HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 00\r\n\r\n')
    t.strictSame([response.status, body], [400, { statusCode: 400, error: 'Bad Request', message: 'El cuerpo de la petición es obligatorio' }])
  })

  t.test('two Authorization headers are one ambiguous credential: 401 Token inválido, whichever comes first', async (t) => {
    const admin = await login(app, seedAccounts.admin.email, seedAccounts.admin.password)
    for (const [first, second] of [[userToken, admin], [admin, userToken], [admin, 'garbage']]) {
      const { response, body } = await exchange(t, `GET /admin/users HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer ${second}\r\n\r\n`)
      t.strictSame([response.status, body, response.headers['www-authenticate']],
        [401, { statusCode: 401, error: 'Unauthorized', message: 'Token inválido' }, 'Bearer error="invalid_token"'])
    }
  })

  const refusals = [
    ['an unknown method', 'FOO /users/me HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'HPE_INVALID_METHOD', 'Petición no válida'],
    ['CONNECT', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'CONNECT', 'Petición no válida'],
    ['an invalid header name', request('GET /users/me', { 'Bad-Header x': 'y' }), 400, 'HPE_INVALID_HEADER_TOKEN', 'Petición no válida'],
    ['headers over 16 KiB', request('GET /users/me', { 'x-big': 'a'.repeat(20_000) }), 431, 'HPE_HEADER_OVERFLOW', 'Las cabeceras de la petición son demasiado grandes']
  ] as const
  for (const [name, text, status, code, message] of refusals) {
    t.test(`the HTTP parser refuses ${name}: ${status} in the contract's shape, logged and counted`, async (t) => {
      const before = await counted(app, '<unparsed>', '<unmatched>', status)
      const { response, body, connection } = await exchange(t, text)
      t.equal(response.status, status)
      t.strictSame(body, { statusCode: status, error: response.status === 400 ? 'Bad Request' : 'Request Header Fields Too Large', message })
      t.equal(response.headers.connection, 'close')
      t.ok(await connection.until(() => connection.closed, 2000), 'closed')
      const lines = log.lines.filter((l) => l.reqId === response.headers['x-request-id'])
      t.equal(lines.length, 1, 'one line')
      const [line] = lines
      t.match(line, { msg: 'request refused by the HTTP parser', statusCode: status, code })
      t.equal(await counted(app, '<unparsed>', '<unmatched>', status), before + 1, 'counted')
    })
  }
})

t.test('a request that arrives while the instance closes gets the contract\'s 503; the one in flight is served and the close ends', async (t) => {
  const { app, connect } = await listening(t)
  // A sign-up in flight holds the close open: the rest of its body is still to come.
  const inFlight = await connect()
  const body = JSON.stringify({ username: 'late1', email: 'late1@example.com', password: 'Secreto123' })
  inFlight.send(request('POST /auth/signup', { 'content-type': 'application/json', 'content-length': body.length }) + body.slice(0, 10))
  // Another connection is mid-request, so closing does not cut it as idle.
  const late = await connect()
  late.send('GET /users/me HTTP/1.1\r\nHost: localhost\r\n')
  await sleep(200)
  const closed = app.close()
  await sleep(200)
  late.send('\r\n')
  await late.until(() => late.responses().length === 1, 5000)
  const [response] = late.responses()
  t.equal(response.status, 503)
  t.strictSame(JSON.parse(response.body), { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' })
  assertContractHeaders(t, response)
  t.equal(response.headers['retry-after'], '1')
  t.equal(response.headers.connection, 'close')
  inFlight.send(body.slice(10))
  await inFlight.until(() => inFlight.responses().length === 1, 5000)
  const [served] = inFlight.responses()
  t.equal(served.status, 201)
  t.strictSame(JSON.parse(served.body), { id: 3, username: 'late1', email: 'late1@example.com' })
  t.equal(served.headers.connection, 'close', 'its connection ends with it')
  const servedAt = Date.now()
  await closed
  t.ok(Date.now() - servedAt < 2000, `closed ${Date.now() - servedAt} ms after the last answer, without waiting for keep-alive to expire`)
})
