import { ConfigError } from './config-error.js'
import { DatabaseUrlError, parseDatabaseUrl, percentDecoded } from './database-url.js'

/** A URL libpq would take and this service can honour, or a ConfigError saying what is wrong with it. */
export function checkedDatabaseUrl (variable: string, url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  try {
    parseDatabaseUrl(url)
  } catch (error) {
    if (error instanceof DatabaseUrlError) throw new ConfigError(variable, error.message)
    throw error
  }
  return url
}

/**
 * A URL ioredis can read, or a ConfigError: ioredis parses it with WHATWG's URL and decodes its
 * user and password, and either failure would stop the start with a bare URIError or TypeError.
 */
export function checkedRedisUrl (url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new ConfigError('REDIS_URL', 'is not a URL that can be parsed')
  }
  if (percentDecoded(parsed.username) === undefined || percentDecoded(parsed.password) === undefined) {
    throw new ConfigError('REDIS_URL', 'has a malformed percent-encoding in its user or password')
  }
  // ioredis sends `SELECT <path>` before every command, `SELECT NaN` too, whose refusal then
  // ended the start with a stack trace; and it reads each query parameter as one of its own
  // options, over the timeouts the limits' fall-back relies on (src/plugins/limits-redis.ts).
  if (!/^\/?(\d{1,5})?$/.test(parsed.pathname)) {
    throw new ConfigError('REDIS_URL', 'must end in its host:port, or a database number such as /2')
  }
  if (parsed.search !== '' || parsed.hash !== '') {
    throw new ConfigError('REDIS_URL', 'takes no ?parameters or #fragment: ioredis would read them as its own options')
  }
  return url
}

/** Variables whose values may carry a secret: a URL's password or key, a key, a header's token. */
const MAY_HOLD_A_SECRET = /^(DATABASE_URL|DATABASE_MIGRATION_URL|REDIS_URL|OTEL_\w+_(ENDPOINT|HEADERS)|JWT_SECRET\w*|JWT_PRIVATE_KEY\w*|DEV_\w+_PASSWORD)$/
const QUOTED_MAX = 60

/**
 * A refused value as its refusal quotes it: not at all where it may hold a secret (a URL's
 * password may sit anywhere in a malformed one: libpq's `key=value` form, a missing `@`, a
 * query's key), else cut to QUOTED_MAX characters.
 */
export function quotedValue (variable: string, value: string): string {
  if (MAY_HOLD_A_SECRET.test(variable)) return 'the value is not quoted: it may hold a secret'
  const cut = [...value]
  return `got ${JSON.stringify(cut.slice(0, QUOTED_MAX).join(''))}${cut.length > QUOTED_MAX ? '…' : ''}`
}
