import { isIP } from 'node:net'

/** libpq's `sslmode` values; `allow` is taken as `prefer` (TLS first, plain when the server has none). */
const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const
export type SslMode = typeof SSL_MODES[number]
/** The `target_session_attrs` a service that writes can use; `any` takes the first server that answers. */
const SESSION_ATTRS = ['any', 'read-write', 'primary'] as const
type SessionAttrs = typeof SESSION_ATTRS[number]

export interface DatabaseHost { readonly host: string, readonly port: number }

/** A PostgreSQL URL in libpq's form, parsed once: what every client of ours connects with. */
export interface DatabaseTarget {
  readonly hosts: readonly DatabaseHost[]
  /** Empty: libpq's defaults (PGDATABASE, PGUSER, then the user's name). */
  readonly database: string
  readonly user: string
  readonly password: string
  readonly sslMode: SslMode
  /** A CA file (PEM), or `system` for the operating system's store. */
  readonly sslRootCert: string | undefined
  readonly sslCert: string | undefined
  readonly sslKey: string | undefined
  readonly targetSessionAttrs: SessionAttrs
  readonly applicationName: string | undefined
}

const PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'target_session_attrs', 'application_name']

/** A URL this service cannot use as written; the message says why, in one line. */
export class DatabaseUrlError extends Error {}

/** `text` percent-decoded, or undefined where an escape is malformed (decodeURIComponent's URIError). */
export function percentDecoded (text: string): string | undefined {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

/** A percent-decoded part of the URL; a malformed escape is named. */
function decodedUrlPart (text: string, what: string): string {
  const decoded = percentDecoded(text)
  if (decoded === undefined) throw new DatabaseUrlError(`has a malformed percent-encoding in ${what}`)
  return decoded
}

/** `h1:5432,[::1]:5433,h3` into hosts and ports (libpq's default port 5432). */
function parseHosts (authority: string): DatabaseHost[] {
  if (authority === '') return [{ host: 'localhost', port: 5432 }]
  const entries = authority.split(',')
  return entries.map((entry, i) => {
    // Named by its place, never quoted: a URL missing its `@` has the password here.
    const which = entries.length === 1 ? 'the host' : `host ${i + 1} of ${entries.length}`
    const match = /^(\[[^\]]+\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(entry)
    const port = Number(match?.[2] ?? 5432)
    if (!match || port < 1 || port > 65535) throw new DatabaseUrlError(`${which} is not host[:port] with a port from 1 to 65535`)
    const host = decodedUrlPart(match[1].replace(/^\[|\]$/g, ''), which) || 'localhost'
    return { host, port }
  })
}

/**
 * Parses `postgres://user:password@h1:5432,h2:5432/db?sslmode=verify-full&…` as libpq does:
 * several hosts, `sslmode` (default `prefer`), `target_session_attrs` (default `read-write` when
 * several hosts are listed, so a standby listed first is skipped), the TLS files. Parameters
 * libpq has but this service cannot honour are refused rather than silently ignored.
 */
export function parseDatabaseUrl (url: string): DatabaseTarget {
  const match = /^postgres(?:ql)?:\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/.exec(url)
  if (!match) throw new DatabaseUrlError('must be postgres://user:password@host:port/database, libpq\'s form')
  // A password with a raw `/`, `?` or a second `@` ends the user part early: what follows would be
  // quoted as a host or a parameter, or looked up in DNS. Refused without quoting any of it.
  if ([match[2], match[3], match[4]].some((part) => part?.includes('@'))) {
    throw new DatabaseUrlError('has an @ where only host:port, the database or parameters may be: percent-encode the password\'s /, @, ?, # and : (%2F, %40, %3F, %23, %3A)')
  }
  const [, userInfo = '', authority, path = '', query = ''] = match
  // As libpq: the user ends at the first colon, and the password, colons and all, follows it.
  const colon = userInfo.indexOf(':')
  const [user, password] = (colon === -1 ? [userInfo, ''] : [userInfo.slice(0, colon), userInfo.slice(colon + 1)])
    .map((part) => decodedUrlPart(part, 'its user or password'))
  const params = new URLSearchParams(query)
  for (const name of params.keys()) {
    if (!PARAMETERS.includes(name)) throw new DatabaseUrlError(`parameter "${name}" is not supported (supported: ${PARAMETERS.join(', ')})`)
  }
  const hosts = parseHosts(authority)
  const sslMode = (params.get('sslmode') ?? 'prefer') as SslMode
  if (!SSL_MODES.includes(sslMode)) throw new DatabaseUrlError(`sslmode must be one of ${SSL_MODES.join(', ')}`)
  const targetSessionAttrs = (params.get('target_session_attrs') ?? (hosts.length > 1 ? 'read-write' : 'any')) as SessionAttrs
  if (!SESSION_ATTRS.includes(targetSessionAttrs)) throw new DatabaseUrlError(`target_session_attrs must be one of ${SESSION_ATTRS.join(', ')} (a service that writes needs the primary)`)
  const sslCert = params.get('sslcert') ?? undefined
  const sslKey = params.get('sslkey') ?? undefined
  if ((sslCert === undefined) !== (sslKey === undefined)) throw new DatabaseUrlError('sslcert and sslkey go together (a client certificate and its key)')
  const sslRootCert = params.get('sslrootcert') ?? undefined
  // libpq 16: the public CAs make only full verification worth anything; a weaker sslmode named beside them is refused.
  if (sslRootCert === 'system' && params.has('sslmode') && sslMode !== 'verify-full') {
    throw new DatabaseUrlError(`sslmode=${sslMode} may not be used with sslrootcert=system: use verify-full, or leave sslmode out`)
  }
  // libpq: a root certificate makes `require` verify the chain, as `verify-ca` does.
  const effectiveMode: SslMode = sslRootCert === 'system' ? 'verify-full' : sslMode === 'require' && sslRootCert ? 'verify-ca' : sslMode
  const host = hosts.find((h) => h.host.startsWith('/'))
  if (host && effectiveMode !== 'disable' && effectiveMode !== 'prefer' && effectiveMode !== 'allow') throw new DatabaseUrlError(`host "${host.host}" is a socket folder, where TLS does not apply: sslmode=${sslMode}`)
  return {
    hosts,
    database: decodedUrlPart(path, 'its database name'),
    user,
    password,
    sslMode: effectiveMode,
    sslRootCert,
    sslCert,
    sslKey,
    targetSessionAttrs,
    applicationName: params.get('application_name') ?? undefined
  }
}

/** The host as `host:port`, for log lines and messages (never the user or password). */
export const describeHost = ({ host, port }: DatabaseHost): string => `${isIP(host) === 6 ? `[${host}]` : host}:${port}`
