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
  return url
}

/**
 * A value as a refusal may quote it: whatever comes before its last `@` may hold a password, with
 * or without a `scheme://` before it (`app:secret@db/users`, `postgres//app:secret@db`), and only
 * a plain user name before a colon is shown.
 */
export function withoutPassword (value: string): string {
  const at = value.lastIndexOf('@')
  if (at === -1) return value
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? ''
  const userInfo = value.slice(scheme.length, at)
  const colon = userInfo.indexOf(':')
  const user = userInfo.slice(0, colon)
  return `${scheme}${colon !== -1 && /^[\w.-]*$/.test(user) ? `${user}:***` : '***'}@${value.slice(at + 1)}`
}
