import { connect, type Socket } from 'node:net'
import { describeHost, type DatabaseHost, type SslMode } from '../config/database-url.js'
import { TlsHandshakeError, negotiateTls, type TlsSettings } from './tls.js'

/** A TCP connect (or a socket folder's connect) that did not complete in time. */
class ConnectTimeoutError extends Error {
  readonly code = 'CONNECT_TIMEOUT'
}

/**
 * One host: TCP (or its Unix socket folder), then what `sslmode` asks for (src/db/tls.ts), within
 * `timeoutMs`. Resolves with the socket that carries the protocol.
 */
export function connectTo (target: DatabaseHost, sslMode: SslMode, tls: TlsSettings | null, timeoutMs: number): Promise<Socket> {
  const started = Date.now()
  const secure = connectOnce(target, sslMode, tls, timeoutMs)
  if (!tls || tls.required) return secure
  // libpq's `prefer`: a TLS connection that fails is tried again without TLS, within the same bound.
  return secure.catch((error: unknown) => {
    if (!(error instanceof TlsHandshakeError)) throw error
    return connectOnce(target, 'disable', null, Math.max(1, timeoutMs - (Date.now() - started)))
  })
}

function connectOnce (target: DatabaseHost, sslMode: SslMode, tls: TlsSettings | null, timeoutMs: number): Promise<Socket> {
  const { host, port } = target
  return new Promise((resolve, reject) => {
    const raw = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host)
    const fail = (error: Error) => { clearTimeout(timer); raw.destroy(); reject(error) }
    const timer = setTimeout(() => fail(new ConnectTimeoutError(`no connection to ${describeHost(target)} within ${timeoutMs} ms`)), timeoutMs)
    raw.once('error', fail)
    raw.once('connect', () => {
      negotiateTls(raw, target, sslMode, tls).then((socket) => {
        clearTimeout(timer)
        raw.removeListener('error', fail)
        resolve(namingItsHost(socket, target))
      }, fail)
    })
  })
}

/**
 * Each error of the socket says where it went, before postgres.js hears of it: a reset says only
 * `read ECONNRESET`, and with several hosts the log could not tell which (CONTRACT §7).
 */
function namingItsHost (socket: Socket, { host, port }: DatabaseHost): Socket {
  socket.on('error', (error: NodeJS.ErrnoException & { address?: string, port?: number }) => {
    error.address ??= host
    error.port ??= port
  })
  return socket
}
