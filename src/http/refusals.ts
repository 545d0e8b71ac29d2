import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { httpError } from './error-bodies.js'
import { ANSWER_HEADERS } from './headers.js'
import { messages } from './messages.js'
import { UNMATCHED_ROUTE, unmatchedPath } from './request-path.js'

/*
 * Answers for requests that never reach a route handler: what Node's HTTP parser refuses, and
 * URLs Fastify's router cannot decode. Given to Fastify's constructor (clientErrorHandler,
 * frameworkErrors) by buildApp.
 */

const routePatterns = new WeakMap<FastifyInstance, Set<string>>()

/** Keeps every route's method and pattern as it is added, for `refuse`: call it before any route. */
export function collectRoutePatterns (app: FastifyInstance): void {
  const patterns = new Set<string>()
  routePatterns.set(app, patterns)
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) patterns.add(`${method} ${route.url}`)
  })
}

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
export function refuse (app: FastifyInstance, socket: Socket, statusCode: number, message: string, code?: string): void {
  const reqId = randomUUID()
  // As Node's own handler: nothing is written over a response already under way.
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify(httpError(statusCode, message))
    socket.write([
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}`,
      'content-type: application/json; charset=utf-8',
      ...Object.entries(ANSWER_HEADERS).map(([name, value]) => `${name}: ${value}`),
      `x-request-id: ${reqId}`,
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      '',
      body
    ].join('\r\n'))
  }
  socket.destroy()
  // A request whose headers came (a body too slow) is logged by its method and path, and counted
  // by its route, as its own line would have been; before the headers, nothing of it is known.
  const started = inFlight?.req
  const method = started?.method
  const path = started === undefined ? undefined : (started.url ?? '/').split('?')[0]
  // Only a path that is itself a route's pattern names the route: any other (percent-encoded,
  // made up) would give the metrics one series per path tried. Looked up in a set, never handed
  // to the router's `hasRoute`, which parses its argument as a pattern and throws on `/auth/*x`.
  const route = path !== undefined && routePatterns.get(app)?.has(`${method} ${path}`) === true ? path : undefined
  const named = started === undefined ? {} : { method, path: unmatchedPath(started.url ?? '/') }
  app.log.info({ reqId, ...named, statusCode, code }, 'request refused by the HTTP parser')
  // No start time is known: counted, and kept out of the latency histogram rather than given a
  // made-up time. The management listener counts none of its requests.
  if (app.hasDecorator('metrics')) app.metrics.observeRequest(method ?? '<unparsed>', route ?? UNMATCHED_ROUTE, statusCode)
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
