import { isIP } from 'node:net'
import { ConfigError } from './config-error.js'

/*
 * TRUST_PROXY (CONTRACT §1, §9): which peers' X-Forwarded-For is believed, and so what the
 * limits count as one client.
 */

/** proxy-addr's names for well-known ranges (each at least a /8 or /7). */
const TRUST_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal'])

/**
 * `true`, `false` or a list of addresses, CIDRs and proxy-addr names. Every entry Fastify's
 * proxy-addr would refuse is refused here, in one line: it would otherwise throw from the
 * Fastify constructor ("invalid range on address", a /0 for instance) after the configuration
 * was accepted.
 */
export function parseTrustProxy (value: string): boolean | string[] {
  // Fastify 5.12.1+ trusts nobody for a hop count (GHSA-3m5p-2c4r-xxw2): every client would share the balancer's counters.
  if (/^[0-9]+$/.test(value)) {
    throw new ConfigError('TRUST_PROXY', `must not be a hop count, which Fastify ignores (GHSA-3m5p-2c4r-xxw2): list the balancers' addresses or CIDRs instead, e.g. 10.0.0.5,10.0.0.6 (got "${value}")`)
  }
  if (value === 'true') return true
  if (value === 'false') return false
  const list = value.split(',').map((s) => s.trim())
  const bad = list.find((entry) => !TRUST_NAMES.has(entry) && prefixBits(entry) === undefined)
  if (bad) throw new ConfigError('TRUST_PROXY', `has an invalid entry: use addresses, CIDRs from /1 up, or loopback, linklocal, uniquelocal (got ${JSON.stringify(bad)})`)
  return list
}

/** The prefix length of an address or CIDR (32 or 128 for a bare address); undefined when malformed or /0. */
function prefixBits (entry: string): number | undefined {
  const [address, bits, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined || address.includes('%')) return undefined
  const max = family === 4 ? 32 : 128
  if (bits === undefined) return max
  const n = /^[0-9]{1,3}$/.test(bits) ? Number(bits) : NaN
  return n >= 1 && n <= max ? n : undefined
}

/**
 * How wide an entry is, in IPv4 terms: IPv6 prefixes count one bit more (a /7 is as acceptable
 * as an IPv4 /8), and an IPv4-mapped prefix (::ffff:0:0/96 and longer) spans IPv4 addresses
 * too, so it counts by its IPv4 part.
 */
function ipv4Bits (entry: string): number {
  if (TRUST_NAMES.has(entry)) return 32
  const bits = prefixBits(entry)!
  const [address] = entry.split('/')
  if (isIP(address) === 4) return bits
  // The URL parser writes IPv6 in its canonical form: [::ffff:a:b] for every spelling of a mapped address.
  const mapped = /^\[::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}\]$/.test(new URL(`http://[${address}]`).hostname) && bits >= 96
  return mapped ? bits - 96 : bits + 1
}

/** Production refuses to believe everyone: `true`, or a prefix wider than /8 (IPv4) or /7 (IPv6). */
export function checkProductionTrustProxy (trustProxy: boolean | readonly string[]): void {
  if (trustProxy === true) {
    throw new ConfigError('TRUST_PROXY', 'must not be "true" in production: it would believe any client\'s X-Forwarded-For; list the balancers\' addresses')
  }
  const wide = Array.isArray(trustProxy) ? trustProxy.find((entry) => ipv4Bits(entry) < 8) : undefined
  if (wide) {
    throw new ConfigError('TRUST_PROXY', `must not hold a prefix shorter than /8 (IPv4) or /7 (IPv6) in production: it would believe almost any client's X-Forwarded-For; list the balancers' addresses (got ${JSON.stringify(wide)})`)
  }
}
