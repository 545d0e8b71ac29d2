import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { freePort } from '../server-process.js'

/**
 * How the network between the service and its target fails:
 * - `refuse`: open connections are reset and nothing listens (a stopped server);
 * - `black-hole`: open connections are reset, new ones are accepted and never answered
 *   (packets dropped by a firewall);
 * - `half-open`: open connections stay open but carry nothing, either way, for good, while new
 *   connections work (a partition, a fail-over: the old peer is gone without a word);
 * - `pause`: nothing moves on any connection, open or new, until `restore()`, which delivers
 *   what waited on the same sockets (a network that stalls, then recovers).
 */
export type CutMode = 'refuse' | 'black-hole' | 'half-open' | 'pause'

/** A pair of sockets the proxy forwards between, and what it holds back during a pause. */
interface Link {
  readonly client: Socket
  upstream?: Socket
  /** Cut by `half-open`: everything read is dropped, nothing is ever closed. */
  frozen: boolean
  readonly waiting: { toUpstream: Buffer[], toClient: Buffer[] }
}

export interface TcpProxy {
  readonly port: number
  cut (mode: CutMode): Promise<void>
  /** Back to forwarding: new connections work again; a pause delivers what waited. Frozen links stay frozen. */
  restore (): Promise<void>
  /** Open client connections: forwarding, frozen by `half-open`, or accepted into a black hole. */
  connections (): { forwarding: number, frozen: number, blackHoled: number }
  close (): Promise<void>
}

/** A TCP proxy on a free loopback port in front of `target`, that tests can cut in the ways of `CutMode`. */
export async function createTcpProxy (target: { host: string, port: number }): Promise<TcpProxy> {
  const port = await freePort()
  const links = new Set<Link>()
  const blackHoled = new Set<Socket>()
  let server: Server | undefined
  let mode: CutMode | undefined

  const connectUpstream = (link: Link) => {
    const upstream = createConnection(target)
    link.upstream = upstream
    // A frozen link tells its client nothing, not even that the target went away.
    const hangUp = () => { if (!link.frozen) link.client.destroy() }
    upstream.on('error', () => { upstream.destroy(); hangUp() })
    upstream.on('close', hangUp)
    upstream.on('data', (chunk: Buffer) => forward(link, chunk, 'toClient'))
    for (const chunk of link.waiting.toUpstream.splice(0)) upstream.write(chunk)
  }

  // Writes ignore back-pressure: test traffic is small, and a pause must not lose what it holds.
  function forward (link: Link, chunk: Buffer, direction: 'toUpstream' | 'toClient') {
    if (link.frozen) return
    if (mode === 'pause' || !link.upstream) link.waiting[direction].push(chunk)
    else (direction === 'toUpstream' ? link.upstream : link.client).write(chunk)
  }

  function accept (client: Socket) {
    client.on('error', () => client.destroy())
    if (mode === 'black-hole') {
      blackHoled.add(client)
      client.on('close', () => blackHoled.delete(client))
      client.resume()
      return
    }
    const link: Link = { client, frozen: false, waiting: { toUpstream: [], toClient: [] } }
    links.add(link)
    client.on('close', () => { links.delete(link); link.upstream?.destroy() })
    client.on('data', (chunk: Buffer) => forward(link, chunk, 'toUpstream'))
    // A connection made during a pause reaches the target only once the network is back.
    if (mode !== 'pause') connectUpstream(link)
  }

  const listen = () => new Promise<void>((resolve, reject) => {
    server = createServer(accept)
    server.once('error', reject).listen(port, '127.0.0.1', resolve)
  })
  const stopListening = () => new Promise<void>((resolve) => server?.listening ? server.close(() => resolve()) : resolve())
  const destroyAll = () => {
    for (const link of links) { link.client.destroy(); link.upstream?.destroy() }
    for (const socket of blackHoled) socket.destroy()
  }

  await listen()
  return {
    port,
    async cut (next) {
      if (mode !== undefined) throw new Error(`the proxy is already cut (${mode})`)
      mode = next
      if (next === 'half-open') {
        for (const link of links) link.frozen = true
      } else if (next === 'pause') {
        for (const link of links) if (!link.frozen) { link.client.pause(); link.upstream?.pause() }
      } else {
        destroyAll()
        if (next === 'refuse') await stopListening()
      }
    },
    async restore () {
      const previous = mode
      mode = undefined
      if (previous === 'refuse') await listen()
      if (previous === 'black-hole') for (const socket of blackHoled) socket.destroy()
      if (previous !== 'pause') return
      for (const link of links) {
        if (link.frozen) continue
        if (!link.upstream) connectUpstream(link)
        for (const chunk of link.waiting.toUpstream.splice(0)) link.upstream!.write(chunk)
        for (const chunk of link.waiting.toClient.splice(0)) link.client.write(chunk)
        link.client.resume()
        link.upstream!.resume()
      }
    },
    connections () {
      const frozen = [...links].filter((link) => link.frozen).length
      return { forwarding: links.size - frozen, frozen, blackHoled: blackHoled.size }
    },
    async close () {
      mode = undefined
      destroyAll()
      await stopListening()
    }
  }
}
