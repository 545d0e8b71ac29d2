import { readFileSync } from 'node:fs'
import type { ConnectionOptions } from 'node:tls'
import { DatabaseUrlError, type DatabaseTarget } from '../config/database-url.js'

/** The server answered the SSLRequest with "no" where `sslmode` requires TLS. */
export class TlsRefusedError extends Error {
  readonly code = 'UMS_DB_TLS_REFUSED'
}

export interface TlsSettings {
  /** Node's options for the handshake (the socket and host are added per connection). */
  readonly options: ConnectionOptions
  /** `require` and stricter: a server without TLS is refused; `prefer` goes on in plain text. */
  readonly required: boolean
}

function readPem (parameter: string, path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new DatabaseUrlError(`${parameter} ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
}

/**
 * libpq's meanings of `sslmode` in Node's terms: `prefer` and `require` encrypt without
 * checking the certificate; `verify-ca` checks that the CA signed it; `verify-full` also that it
 * names the host. The CA is `sslrootcert`'s file, or the system's store. Files are read once,
 * here, so a missing one stops the start with its name.
 */
export function tlsSettings (target: DatabaseTarget): TlsSettings | null {
  if (target.sslMode === 'disable') return null
  const client = target.sslCert && target.sslKey ? { cert: readPem('sslcert', target.sslCert), key: readPem('sslkey', target.sslKey) } : {}
  if (target.sslMode === 'allow' || target.sslMode === 'prefer' || target.sslMode === 'require') {
    return { options: { ...client, rejectUnauthorized: false }, required: target.sslMode === 'require' }
  }
  const ca = target.sslRootCert && target.sslRootCert !== 'system' ? { ca: readPem('sslrootcert', target.sslRootCert) } : {}
  const identity = target.sslMode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}
  return { options: { ...client, ...ca, ...identity, rejectUnauthorized: true }, required: true }
}
