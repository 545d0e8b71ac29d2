import { createConnection, type Socket } from 'node:net'

export interface RawResponse { status: number, headers: Record<string, string>, body: string }

/**
 * One TCP connection that speaks HTTP/1.1 by hand, for what `inject` and `http.request` cannot
 * send: huge announced bodies, `Expect` without a body, slow headers, malformed requests.
 */
export class RawConnection {
  received = ''
  closed = false
  readonly openedAt = Date.now()
  closedAt: number | undefined
  private readonly waiters = new Set<() => void>()

  private constructor (readonly socket: Socket) {
    const wake = () => { for (const waiter of this.waiters) waiter() }
    socket.on('data', (chunk) => { this.received += chunk.toString('latin1'); wake() })
    socket.on('error', () => {})
    socket.on('close', () => { this.closed = true; this.closedAt = Date.now(); wake() })
  }

  static async open (port: number): Promise<RawConnection> {
    const socket = createConnection({ host: '127.0.0.1', port })
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    return new RawConnection(socket)
  }

  send (text: string | Buffer): boolean {
    return !this.closed && this.socket.write(text)
  }

  /** Resolves when `done()` holds, or after `timeoutMs` whatever it says. */
  async until (done: () => boolean, timeoutMs: number): Promise<boolean> {
    if (done()) return true
    return new Promise((resolve) => {
      const check = () => { if (done()) finish(true) }
      const timer = setTimeout(() => finish(false), timeoutMs)
      const finish = (result: boolean) => { clearTimeout(timer); this.waiters.delete(check); resolve(result) }
      this.waiters.add(check)
    })
  }

  /** The complete responses received so far, interim (1xx) ones included. */
  responses (): RawResponse[] {
    const responses: RawResponse[] = []
    let rest = this.received
    for (;;) {
      const headEnd = rest.indexOf('\r\n\r\n')
      if (headEnd === -1) return responses
      const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n')
      const headers = Object.fromEntries(lines.map((line) => {
        const colon = line.indexOf(':')
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]
      }))
      const status = Number(statusLine.split(' ')[1])
      const length = status < 200 ? 0 : Number(headers['content-length'] ?? 0)
      if (rest.length < headEnd + 4 + length) return responses
      // Bodies are UTF-8; the socket was read as latin1 to count bytes right.
      const body = Buffer.from(rest.slice(headEnd + 4, headEnd + 4 + length), 'latin1').toString('utf8')
      responses.push({ status, headers, body })
      rest = rest.slice(headEnd + 4 + length)
    }
  }

  close (): void {
    this.socket.destroy()
  }
}
