import fp from 'fastify-plugin'
import { errorCodes } from 'fastify'
import { bodiless, unserved } from '../http/request-path.js'

/**
 * The service's one JSON body parser (CONTRACT §4). Fastify's own decodes the bytes with
 * Buffer#toString, which turns invalid UTF-8 into U+FFFD: two different broken usernames
 * would be one stored name. Here invalid UTF-8 is malformed JSON (400), and the text then goes
 * to Fastify's own parser (secure-json-parse with the instance's prototype-poisoning options).
 * An empty body is an absent one, whatever its Content-Type: /users/me's body is optional, and
 * sign-up and login answer an absent body with their own 400.
 */
export default fp(async function jsonBodyPlugin (app) {
  const parse = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error')
  // ignoreBOM keeps a leading BOM in the text, for secure-json-parse to strip as before.
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, function (request, body, done) {
    if (body.length === 0) return done(null, undefined)
    let text: string
    try {
      text = utf8.decode(body as Buffer)
    } catch {
      return done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined)
    }
    parse(request, text, done)
  })
  // Any other type: Fastify runs a parser whenever a Content-Type is sent, body or not. With no
  // body (a Content-Length of 0, or neither it nor Transfer-Encoding) the type describes nothing:
  // the body is absent, as above, rather than 415. A body of another type is 415, refused unread
  // (a chunked one too, however short); a path no route serves keeps its 404 (or 401), as without
  // this parser.
  // A type Fastify cannot read at all is its 415 before any parser: src/plugins/http-edges.ts.
  app.addContentTypeParser('*', function (request, _payload, done) {
    if (bodiless(request.headers) || unserved(request)) return done(null, undefined)
    done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined)
  })
}, { fastify: '5.x', name: 'json-body' })
