import type { FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'

/** Label of requests that matched no route: a raw URL would make one series per path tried. */
export const UNMATCHED_ROUTE = '<unmatched>'

/**
 * An unmatched request's path as its log line shows it: without the query string, and without
 * any segment that may hold an e-mail (an `@`, written or percent-encoded), which the request did
 * not prove (CONTRACT §7).
 */
export function unmatchedPath (url: string): string {
  return url.split('?')[0].slice(0, 256).split('/').map((segment) => mayHoldEmail(segment) ? '[redacted]' : segment).join('/')
}

/** An at sign, ASCII or look-alike, written or percent-encoded any number of times (up to three). */
function mayHoldEmail (segment: string): boolean {
  let text = segment
  for (let round = 0; round < 4; round++) {
    if (/[@\uFF20\uFE6B]/.test(text)) return true
    if (!text.includes('%')) return false
    try {
      // A stray % (not an escape) stands for itself.
      text = decodeURIComponent(text.replace(/%(?![0-9a-f]{2})/gi, '%25'))
    } catch {
      // Escapes that are not UTF-8: each byte alone.
      text = text.replace(/%[0-9a-f]{2}/gi, (escape) => String.fromCharCode(parseInt(escape.slice(1), 16)))
    }
  }
  return false
}

/** No route serves the path: none at all, or a prefix's `/*` catch-all, which answers 404 (routes/). */
export const unserved = (request: FastifyRequest): boolean => request.is404 || request.routeOptions.url?.endsWith('*') === true

/** The request has no body: a Content-Length of 0, or neither it nor Transfer-Encoding. */
export function bodiless (headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length']
  return headers['transfer-encoding'] === undefined && (length === undefined || Number(length) === 0)
}
