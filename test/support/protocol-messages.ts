/** A server message of PostgreSQL's protocol: its type, its length, its body. */
export function message (type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5)
  head.write(type)
  head.writeUInt32BE(4 + body.length, 1)
  return Buffer.concat([head, body])
}

export const int32s = (...values: number[]): Buffer => Buffer.concat(values.map((v) => { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b }))

/**
 * What a server sends while a connection starts: a protocol version it offers instead, SASL's
 * first challenge and its end, a notice, authentication ok, a parameter, the key (pid 4242,
 * secret 3000000000), ready.
 */
export const startup = Buffer.concat([
  message('v', int32s(196608, 0)),
  message('R', Buffer.concat([int32s(10), Buffer.from('SCRAM-SHA-256\u0000\u0000')])),
  message('R', Buffer.concat([int32s(12), Buffer.from('v=c2lnbmF0dXJl')])),
  message('N', Buffer.from('SNOTICE\u0000Mhello\u0000\u0000')),
  message('R', int32s(0)),
  message('S', Buffer.from('server_version\u000015.0\u0000')),
  message('K', int32s(4242, 3_000_000_000)),
  message('Z', Buffer.from('I'))
])
