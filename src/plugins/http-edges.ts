import type { Socket } from 'node:net'
import fp from 'fastify-plugin'
import { httpError, sendUnavailable } from '../http/error-bodies.js'
import { refuse } from '../http/refusals.js'
import { bodiless, unserved } from '../http/request-path.js'
import { messages } from '../http/messages.js'

// Node's own test of the header (lib/_http_server.js).
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i
/**
 * RFC 3986's `uri-host [":" port]`: an IPv6 literal (with an RFC 6874 zone) or an IPvFuture one,
 * or a name or IPv4 address with percent-escapes (empty is allowed: RFC 9112 §3.2).
 */
const HOST = /^(?:\[(?:[0-9A-Fa-f:.]+(?:%25[\w.~-]+)?|v[0-9A-Fa-f]+\.[\w.~!$&'()*+,;=:-]+)\]|(?:[\w.~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::\d*)?$/

declare module 'fastify' {
  interface FastifyInstance {
    /** The shutdown drain began: answers close their connections from now on. */
    beginDrain: () => void
  }
}

/**
 * CONTRACT §7's HTTP edges: an answer sent before the body was read closes the connection
 * instead of letting Node drain the body (its default, to keep the connection alive);
 * `100 Continue` is sent only once the request passed the token check and its route exists;
 * answers close their connections from the start of the shutdown drain; requests that arrive
 * while the instance closes get the contract's 503; an HTTP/1.1 request without Host gets 400.
 */
export default fp(async function httpEdgesPlugin (app) {
  // With a listener, Node no longer answers `100 Continue` by itself: the preParsing hook does,
  // and the onRequest hooks (token, role, sign-up limit) run before it.
  app.server.on('checkContinue', (req, res) => app.server.emit('request', req, res))
  // Any other expectation is ignored, as RFC 9110 §10.1.1 allows, rather than Node's bare 417.
  app.server.on('checkExpectation', (req, res) => app.server.emit('request', req, res))
  // CONNECT is no method of this service; Node would close the connection without a word.
  app.server.on('connect', (_req, socket: Socket) => refuse(app, socket, 400, messages.invalidRequest, 'CONNECT'))

  // From SIGTERM (server.ts), or the close for an app closed without a drain, every answer ends
  // its connection: the balancer's next request opens one, to an instance it still sends to,
  // instead of racing the listener's close on one kept idle here.
  let draining = false
  app.decorate('beginDrain', () => { draining = true })
  // Fastify's own answer while closing (return503OnClosing) is an English body without our headers.
  let closing = false
  app.addHook('preClose', async () => { closing = draining = true })
  app.addHook('onRequest', (request, reply, done) => {
    // Before the token check: a request that came during the drain is sent elsewhere, whoever sent it.
    if (closing) sendUnavailable(reply)
    // RFC 9112 §3.2: an HTTP/1.1 request without Host, and any with a Host that is not one (or sent
    // twice: Node joins the two with ", "), is refused (Node's own check is off, src/app.ts).
    else if (request.raw.headers.host === undefined ? request.raw.httpVersion !== '1.0' : !HOST.test(request.raw.headers.host)) {
      reply.header('connection', 'close').code(400).send(httpError(400, messages.invalidRequest))
    } else done()
  })

  app.addHook('preParsing', (request, reply, payload, done) => {
    const { raw } = request
    // A Content-Type Fastify cannot read (`json`, an empty one) is its 415 before any parser runs.
    // With no body, or on a path no route serves, the type describes nothing the service reads:
    // it goes to the parsers (src/plugins/json-body.ts) as one Fastify reads, and the body is
    // absent (not dropped: a QUERY without one is Fastify's 400).
    const type = raw.headers['content-type']
    if (type !== undefined && type !== 'application/json' && (bodiless(raw.headers) || unserved(request))) raw.headers['content-type'] = 'application/octet-stream'
    if (raw.headers.expect === undefined || !CONTINUE.test(raw.headers.expect) || raw.complete !== false) return done(null, payload)
    // The `/*` catch-all of a prefix answers 404 too: its route exists only in name. The client
    // waits for a word before it sends the body, so the 404 goes now, without reading it.
    if (unserved(request)) return reply.code(404).send(httpError(404, messages.notFound))
    // HTTP/1.0 has no interim answers (RFC 9110 §15.2).
    if (raw.httpVersion !== '1.0') reply.raw.writeContinue()
    done(null, payload)
  })

  app.addHook('onSend', (request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close')
    // `complete` is Node's: false while body bytes are still to come (light-my-request leaves it unset).
    if (request.raw.complete === false) {
      reply.header('connection', 'close')
      // Node would still read on until the socket is down (its `_dump`), at network speed: the socket
      // goes as soon as the answer is handed to the kernel, having read only what came before it.
      reply.raw.once('finish', () => request.raw.socket.destroy())
    }
    done(null, payload)
  })
}, { fastify: '5.x', name: 'http-edges', dependencies: ['metrics'] })
