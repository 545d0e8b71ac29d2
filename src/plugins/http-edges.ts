import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import fp from 'fastify-plugin'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { messages } from '../messages.js'
import { httpError } from './errors.js'
import { UNMATCHED_ROUTE } from './metrics.js'

// Node's own test of the header (lib/_http_server.js).
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i

/** The HTTP parser's refusals (Node's `clientError` codes), in the contract's words. */
function parserRefusal (code: string | undefined): [number, string] {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, messages.requestTimeout]
  if (code === 'HPE_HEADER_OVERFLOW') return [431, messages.headersTooLarge]
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return [413, messages.bodyTooLarge]
  return [400, messages.invalidRequest]
}

/**
 * Answers, logs and counts a request the parser refused, where no request or reply object
 * exists: the whole HTTP message is written to the socket, which is then closed (the parser
 * cannot go on). It carries the contract's body and headers and never echoes the request.
 */
function refuse (app: FastifyInstance, socket: Socket, statusCode: number, message: string, code?: string): void {
  const reqId = randomUUID()
  // As Node's own handler: nothing is written over a response already under way.
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify(httpError(statusCode, message))
    socket.write([
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}`,
      'content-type: application/json; charset=utf-8',
      'x-content-type-options: nosniff',
      'cache-control: no-store',
      `x-request-id: ${reqId}`,
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      '',
      body
    ].join('\r\n'))
  }
  socket.destroy()
  app.log.info({ reqId, statusCode, code }, 'request refused by the HTTP parser')
  // No method or route was parsed, and no start time is known: the count is what matters.
  app.metrics.observeRequest('<unparsed>', UNMATCHED_ROUTE, statusCode, 0)
}

/** Fastify's `clientErrorHandler` (Node's `clientError`): 400, 408, 413 or 431 in the contract's shape. */
export function clientErrorHandler (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset or closed connection has nobody left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const [statusCode, message] = parserRefusal(error.code)
  refuse(this, socket, statusCode, message, error.code)
}

const rerouted = new WeakSet<object>()

/**
 * Fastify's `frameworkErrors`: a URL its router cannot decode (`FST_ERR_BAD_URL`: `/admin/%zz`)
 * is routed once more with every `%` escaped, so it is an unknown path like any other and
 * goes through the whole pipeline: token check (401 without one, SPEC rule 9), 404, contract
 * headers, log line and metrics. Fastify's own answer is a 400 that echoes the URL.
 */
export function rerouteFrameworkError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const { raw } = request
  const url = raw.url ?? '/'
  // Escaped, the URL decodes; any other router failure (none is possible with our routes) goes to '/'.
  const target = error.code === 'FST_ERR_BAD_URL' && url.startsWith('/') ? url.replaceAll('%', '%25') : '/'
  // A second failure would loop: answer it here instead.
  if (rerouted.has(raw)) {
    reply.code(400).header('connection', 'close').send(httpError(400, messages.invalidRequest))
    return
  }
  rerouted.add(raw)
  raw.url = target
  request.server.routing(raw, reply.raw)
}

/**
 * CONTRACT §7's HTTP edges: an answer sent before the body was read closes the connection
 * instead of letting Node drain the body (its default, to keep the connection alive);
 * `100 Continue` is sent only once the request passed the token check and its route exists;
 * requests that arrive while the instance closes get the contract's 503.
 */
export default fp(async function httpEdgesPlugin (app) {
  // With a listener, Node no longer answers `100 Continue` by itself: the preParsing hook does,
  // and the onRequest hooks (token, role, sign-up limit) run before it.
  app.server.on('checkContinue', (req, res) => app.server.emit('request', req, res))
  // Any other expectation is ignored, as RFC 9110 §10.1.1 allows, rather than Node's bare 417.
  app.server.on('checkExpectation', (req, res) => app.server.emit('request', req, res))
  // CONNECT is no method of this service; Node would close the connection without a word.
  app.server.on('connect', (_req, socket: Socket) => refuse(app, socket, 400, messages.invalidRequest, 'CONNECT'))

  // Fastify's own answer while closing (return503OnClosing) is an English body without our headers.
  let closing = false
  app.addHook('preClose', async () => { closing = true })
  app.addHook('onRequest', async (_request, reply) => {
    // Before the token check: a request that came during the drain is sent elsewhere, whoever sent it.
    if (closing) return reply.code(503).header('retry-after', '1').send(httpError(503, messages.unavailable))
  })

  app.addHook('preParsing', async (request, reply, payload) => {
    const { raw } = request
    if (raw.headers.expect === undefined || !CONTINUE.test(raw.headers.expect) || raw.complete !== false) return payload
    // The `/*` catch-all of a prefix answers 404 too: its route exists only in name. The client
    // waits for a word before it sends the body, so the 404 goes now, without reading it.
    if (request.is404 || request.routeOptions.url?.endsWith('*')) return reply.code(404).send(httpError(404, messages.notFound))
    // HTTP/1.0 has no interim answers (RFC 9110 §15.2).
    if (raw.httpVersion !== '1.0') reply.raw.writeContinue()
    return payload
  })

  app.addHook('onSend', async (request, reply) => {
    // Once closing, every answer ends its connection: the close need not wait for keep-alives to idle out.
    if (closing) reply.header('connection', 'close')
    // `complete` is Node's: false while body bytes are still to come (light-my-request leaves it unset).
    if (request.raw.complete !== false) return
    reply.header('connection', 'close')
    // Node would still read on until the socket is down (its `_dump`), at network speed: the socket
    // goes as soon as the answer is handed to the kernel, having read only what came before it.
    reply.raw.once('finish', () => request.raw.socket.destroy())
  })
}, { fastify: '5.x', name: 'http-edges', dependencies: ['metrics'] })
