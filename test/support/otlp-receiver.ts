import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Test } from 'tap'

/** One span as OTLP/HTTP JSON carries it, with its attributes made a plain object. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number
  /** When it started, in ms since the epoch. */
  readonly startMs: number
  readonly attributes: Record<string, unknown>
  readonly status: { code?: number, message?: string }
  /** The request body it came in, as sent: what a secret must never be found in. */
  readonly raw: string
}

/**
 * A collector on a free loopback port that takes OTLP/HTTP JSON at /v1/traces. Its mode says what
 * it does with an export: take it, refuse it (503), or black-hole it (read it, never answer).
 */
export async function otlpReceiver (t: Test) {
  let mode: 'accept' | 'refuse' | 'black-hole' = 'accept'
  const spans: ReceivedSpan[] = []
  /** The content type of every export that came, taken or not. */
  const contentTypes: string[] = []
  const sockets = new Set<Socket>()
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      contentTypes.push(String(request.headers['content-type']))
      if (mode === 'black-hole') return
      if (mode === 'refuse') return void response.writeHead(503).end()
      const raw = Buffer.concat(chunks).toString('utf8')
      // Protobuf exports are counted (contentTypes), not decoded.
      if (request.headers['content-type'] === 'application/json') spans.push(...parseExport(raw))
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  const { port } = server.address() as { port: number }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    setMode (next: typeof mode) { mode = next },
    /** Waits until `predicate` holds over the spans received, or rejects after `timeoutMs`. */
    async until (predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs = 10_000): Promise<ReceivedSpan[]> {
      const deadline = Date.now() + timeoutMs
      while (!predicate(spans)) {
        if (Date.now() > deadline) throw new Error(`the spans expected did not arrive within ${timeoutMs} ms; got ${spans.map((s) => s.name).join(', ')}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      return spans
    }
  }
}

type AnyValue = { stringValue?: string, intValue?: string | number, doubleValue?: number, boolValue?: boolean, arrayValue?: { values?: AnyValue[] } }
const valueOf = (value: AnyValue): unknown =>
  value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ?? value.boolValue ??
  value.arrayValue?.values?.map(valueOf)
const attributesOf = (list: Array<{ key: string, value: AnyValue }> = []) => Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]))

function parseExport (raw: string): ReceivedSpan[] {
  const body = JSON.parse(raw) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: any[] }> }> }
  return (body.resourceSpans ?? []).flatMap((resource) => (resource.scopeSpans ?? []).flatMap((scope) => (scope.spans ?? []).map((span) => ({
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId || undefined,
    name: span.name,
    kind: span.kind,
    startMs: Number(BigInt(span.startTimeUnixNano) / 1_000_000n),
    attributes: attributesOf(span.attributes),
    status: span.status ?? {},
    raw
  }))))
}
