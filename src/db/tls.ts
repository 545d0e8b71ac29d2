import { X509Certificate } from 'node:crypto'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { isIP, type Socket } from 'node:net'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { connect, createSecureContext, type ConnectionOptions, type SecureContext } from 'node:tls'
import { DatabaseUrlError, describeHost, type DatabaseHost, type DatabaseTarget, type SslMode } from '../config/database-url.js'
import { NotPostgresError, StartupRefusedError, refusalIn } from './startup-answer.js'
import { NotReadyError } from './pg-errors.js'

// PostgreSQL's SSLRequest: length 8, code 80877103. The server answers one byte, S or N.
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])

/** The server answered the SSLRequest with "no" where `sslmode` requires TLS. */
class TlsRefusedError extends Error {
  readonly code = 'UMS_DB_TLS_REFUSED'
}

/**
 * The TLS handshake with a host failed: its certificate (Node's code kept, UNABLE_TO_VERIFY_…,
 * for the log and the 503), or an alert from the server. Names the host, which Node's error does
 * not, and OpenSSL's reason alone where its message is a library's trace.
 */
export class TlsHandshakeError extends Error {
  readonly code: string | undefined
  constructor (server: string, cause: Error & { code?: string }) {
    // Not chained as its cause: the log names the deepest link, which would be Node's, without the host.
    super(`${server} failed the TLS handshake: ${/SSL routines:[^:]*:([^:]+)/.exec(cause.message)?.[1] ?? cause.message}`)
    this.name = 'TlsHandshakeError'
    this.code = cause.code
  }
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
 * libpq's rule for the key file, so a DATABASE_URL that libpq refuses is refused here too: a
 * key others can read is a secret already spread, and the operator hears of it at start.
 */
function checkKeyPermissions (path: string): void {
  let stats
  try { stats = statSync(path) } catch { return } // readPem says why it cannot be read
  if (!stats.isFile()) throw new DatabaseUrlError(`sslkey ${path} is not a regular file`)
  const ownedByUs = stats.uid === process.geteuid?.()
  if ((ownedByUs && (stats.mode & 0o077) !== 0) || (stats.uid === 0 && (stats.mode & 0o037) !== 0)) {
    throw new DatabaseUrlError(`sslkey ${path} has group or world access (mode ${(stats.mode & 0o777).toString(8).padStart(4, '0')}): libpq requires 0600 or less if owned by the service's user, 0640 or less if owned by root`)
  }
}

/** The client certificate and key, read: `secureContext` below loads them. */
function clientIdentity (cert: string, key: string): { cert: Buffer, key: Buffer } {
  checkKeyPermissions(key)
  return { cert: readPem('sslcert', cert), key: readPem('sslkey', key) }
}

/**
 * The handshakes' one context, made here rather than by each connection: a client certificate and
 * key that do not fit stop the start, never a running instance's handshake.
 */
function secureContext (target: DatabaseTarget, files: { cert?: Buffer, key?: Buffer, ca?: Buffer }): { secureContext: SecureContext } {
  try {
    return { secureContext: createSecureContext(files) }
  } catch (error) {
    // The code only (ERR_OSSL_X509_KEY_VALUES_MISMATCH, ERR_OSSL_BAD_DECRYPT…): OpenSSL's text is no clearer, and nothing of the key is quoted.
    throw new DatabaseUrlError(`sslcert ${target.sslCert} and sslkey ${target.sslKey} cannot be used together (${(error as { code?: string }).code ?? 'not a certificate and its unencrypted key'})`)
  }
}

const libpqDefaultRoot = () => join(homedir(), '.postgresql', 'root.crt')
/** The CA file to check against, as libpq picks it: `sslrootcert` (`system` too), else its default file where it exists. */
const rootCertFile = (target: DatabaseTarget) => target.sslRootCert ?? (existsSync(libpqDefaultRoot()) ? libpqDefaultRoot() : undefined)

/** The CAs a verifying mode trusts: `sslrootcert`'s file, libpq's default file, or Node's public CAs for `system`. */
function trustedRoots (target: DatabaseTarget, rootCert: string | undefined): { ca?: Buffer } {
  // Without a file libpq refuses to verify, rather than trust any public CA.
  if (rootCert === undefined) {
    throw new DatabaseUrlError(`sslmode=${target.sslMode} needs sslrootcert: the file of the CA that signed the server's certificate, or system with verify-full (${libpqDefaultRoot()}, libpq's default, does not exist)`)
  }
  if (rootCert === 'system') return {}
  const ca = readPem('sslrootcert', rootCert)
  try {
    void new X509Certificate(ca)
  } catch {
    throw new DatabaseUrlError(`sslrootcert ${rootCert} holds no PEM certificate`)
  }
  return { ca }
}

/**
 * libpq's meanings of `sslmode` in Node's terms: `prefer` and `require` encrypt without
 * checking the certificate (`require` checks the chain when a CA file is at hand); `verify-ca` checks that the CA signed it; `verify-full` also that it
 * names the host. Files are read and loaded once, here, so a missing or broken one stops the
 * start with its name, never a running instance's handshake.
 */
export function tlsSettings (target: DatabaseTarget): TlsSettings | null {
  if (target.sslMode === 'disable') return null
  const client = target.sslCert && target.sslKey ? clientIdentity(target.sslCert, target.sslKey) : {}
  const rootCert = rootCertFile(target)
  // libpq: with a CA file at hand, `require` checks the chain as verify-ca does.
  const mode = target.sslMode === 'require' && rootCert !== undefined ? 'verify-ca' : target.sslMode
  if (mode === 'allow' || mode === 'prefer' || mode === 'require') {
    return { options: { ...secureContext(target, client), rejectUnauthorized: false }, required: mode === 'require' }
  }
  const identity = mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}
  return { options: { ...secureContext(target, { ...client, ...trustedRoots(target, rootCert) }), ...identity, rejectUnauthorized: true }, required: true }
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
        let secure
        try {
          secure = connect({ ...tls.options, socket: raw, host, servername: isIP(host) ? undefined : host })
        } catch (error) {
          // Thrown here, in a socket's listener, it would end the process.
          raw.destroy()
          return reject(error)
        }
        const failed = (error: Error) => reject(new TlsHandshakeError(describeHost({ host, port }), error))
        secure.once('error', failed)
        secure.once('secureConnect', () => { secure.removeListener('error', failed); resolve(secure) })
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
