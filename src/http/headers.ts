import type { FastifyCorsOptions } from '@fastify/cors'

/** Headers every answer of the API carries (CONTRACT §7), beside its `x-request-id`. */
export const ANSWER_HEADERS = { 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' } as const

/**
 * @fastify/cors's options for the allowed origins, decided per request, not a list: given a list,
 * it adds the other headers (Expose-Headers…) to every answer whatever the Origin; `origin: false`
 * adds none. An OPTIONS that is not a preflight (no Access-Control-Request-Method) is left to the
 * routes, whose 401 or 404 has the contract's shape, where @fastify/cors would answer a text/plain 400.
 */
export function corsOptions (origins: readonly string[]): FastifyCorsOptions {
  const allowed = new Set(origins)
  const exposedHeaders = ['x-request-id', 'retry-after', 'www-authenticate']
  return {
    delegator: (request, callback) => {
      const { origin, 'access-control-request-method': preflightFor } = request.headers
      const crossOrigin = origin !== undefined && allowed.has(origin) && (request.method !== 'OPTIONS' || preflightFor !== undefined)
      callback(null, { origin: crossOrigin ? origin : false, exposedHeaders })
    }
  }
}
