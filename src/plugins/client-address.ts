import { isIP } from 'node:net'
import fp from 'fastify-plugin'
import type { Config } from '../config/index.js'
import { throttledWarning } from '../telemetry/dependency-log.js'

/**
 * A forwarded entry that can name a client: an IP address, without an IPv6 zone (a zone means
 * nothing outside the host that wrote it, and Node accepts one of any length).
 */
function isForwardedAddress (entry: string): boolean {
  return isIP(entry) !== 0 && !entry.includes('%')
}

/**
 * X-Forwarded-For without its entries up to the right-most one that is not an IP address,
 * or undefined when nothing remains; the header itself when every entry is an address.
 */
export function dropForgedEntries (header: string): string | undefined {
  const entries = header.split(',').map((entry) => entry.trim()).filter(Boolean)
  let kept = entries.length
  while (kept > 0 && isForwardedAddress(entries[kept - 1])) kept--
  if (kept === 0) return header
  const rest = entries.slice(kept)
  return rest.length > 0 ? rest.join(', ') : undefined
}

/**
 * CONTRACT §9: a forwarded value that is not an IP address is ignored, and the nearest trusted
 * hop's address counts instead. proxy-addr walks X-Forwarded-For from the right through trusted
 * hops and returns whatever entry it stops at, so `foo` (or 8,000 characters) from a trusted
 * hop would become `request.ip`, and with it a counter key and a log field. Cutting the header
 * at its right-most non-address entry, before anything reads `request.ip`, makes Fastify's own
 * `request.ip` and `request.ips` stop at the hop that forwarded it. Registered before every
 * plugin that reads `request.ip` (the limits, security events).
 */
export default fp<{ config: Config }>(async function clientAddressPlugin (app, { config }) {
  // Without TRUST_PROXY the header is never read for the address: a balancer in front that
  // sends it puts all its clients on one address, so the abuse limits' counters are shared.
  if (config.trustProxy === false) {
    if (!config.rateLimits) return
    const warn = throttledWarning(app.log, 'X-Forwarded-For received while TRUST_PROXY is off: every client behind that proxy shares one set of abuse counters')
    app.addHook('onRequest', (request, _reply, done) => {
      if (request.headers['x-forwarded-for'] !== undefined) warn({ reqId: request.id, clientAddress: request.ip })
      done()
    })
    return
  }
  app.addHook('onRequest', (request, _reply, done) => {
    const header = request.raw.headers['x-forwarded-for']
    const kept = typeof header === 'string' ? dropForgedEntries(header) : header
    if (kept !== header) {
      if (kept === undefined) delete request.raw.headers['x-forwarded-for']
      else request.raw.headers['x-forwarded-for'] = kept
    }
    done()
  })
}, { fastify: '5.x', name: 'client-address' })
