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

/** A value as a refusal may quote it: a URL's password (up to its last `@`) never is. */
export function withoutPassword (value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/)(.*)@/i, (_, scheme: string, userInfo: string) =>
    `${scheme}${userInfo.includes(':') ? `${userInfo.slice(0, userInfo.indexOf(':'))}:***` : userInfo}@`)
}
