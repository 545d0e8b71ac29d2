import { readFileSync } from 'node:fs'
import { isIP, type Socket } from 'node:net'
import { connect, type ConnectionOptions } from 'node:tls'
import { DatabaseUrlError, describeHost, type DatabaseHost, type DatabaseTarget, type SslMode } from '../config/database-url.js'
import { NotPostgresError, StartupRefusedError, refusalIn } from './startup-answer.js'
import { NotReadyError } from './pg-errors.js'

// PostgreSQL's SSLRequest: length 8, code 80877103. The server answers one byte, S or N.
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])

/** The server answered the SSLRequest with "no" where `sslmode` requires TLS. */
class TlsRefusedError extends Error {
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

/**
 * On a connected socket: nothing without TLS; else the SSLRequest, and on the server's yes the
 * handshake (on its no, plain text where `prefer` allows it). Resolves with the socket that
 * carries the protocol: the TLS one, or the plain one.
 */
export function negotiateTls (raw: Socket, { host, port }: DatabaseHost, sslMode: SslMode, tls: TlsSettings | null): Promise<Socket> {
  if (!tls) return Promise.resolve(raw)
  return new Promise((resolve, reject) => {
    // A server (or a balancer whose backend is down) that hangs up unanswered is a failure now,
    // as in plain text, not a wait for the connect timeout.
    const closed = () => reject(new NotReadyError(describeHost({ host, port }), true))
    raw.once('close', closed)
    raw.write(SSL_REQUEST)
    raw.once('data', (answer) => {
      raw.removeListener('close', closed)
      if (answer[0] === 0x53) {
        const secure = connect({ ...tls.options, socket: raw, host, servername: isIP(host) ? undefined : host })
        secure.once('error', reject)
        secure.once('secureConnect', () => { secure.removeListener('error', reject); resolve(secure) })
      } else if (answer[0] === 0x45) {
        // A postmaster that cannot start a backend says so in text, before reading the request.
        reject(new StartupRefusedError(describeHost({ host, port }), refusalIn(answer)))
      } else if (answer[0] !== 0x4e) {
        reject(new NotPostgresError(describeHost({ host, port })))
      } else if (!tls.required) {
        resolve(raw)
      } else {
        reject(new TlsRefusedError(`${describeHost({ host, port })} does not accept TLS, which sslmode=${sslMode} requires`))
      }
    })
  })
}
