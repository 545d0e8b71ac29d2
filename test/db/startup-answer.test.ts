import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import t from 'tap'
import type { BackendKey } from '../../src/db/cancels.js'
import { fatalAnswer, readStartupAnswer, type StartupRefusal } from '../../src/db/startup-answer.js'
import { int32s, message, startup } from '../support/protocol-messages.js'

/** What the reader said of `chunks`, fed to a stand-in socket, and whether it still reads. */
function read (chunks: Buffer[]) {
  const heard: Array<BackendKey | StartupRefusal | 'ready' | 'foreign'> = []
  const socket = new EventEmitter() as Socket
  readStartupAnswer(socket, { onKey: (key) => heard.push(key), onReady: () => heard.push('ready'), onRefused: (refusal) => heard.push(refusal), onForeign: () => heard.push('foreign') })
  for (const chunk of chunks) socket.emit('data', chunk)
  return { heard, reading: socket.listenerCount('data') > 0 }
}

t.test('the key and the ready state, read across chunks however the network cuts them: here one byte at a time', async (t) => {
  t.strictSame(read([...startup].map((byte) => Buffer.from([byte]))), { heard: [{ pid: 4242, secret: 3_000_000_000 }, 'ready'], reading: false })
  t.strictSame(read([startup]), { heard: [{ pid: 4242, secret: 3_000_000_000 }, 'ready'], reading: false }, 'in one chunk')
})

t.test('a server that refuses the connection at startup: its SQLSTATE and message, and the reading stops', async (t) => {
  const refusal = message('E', Buffer.from('SFATAL\u0000VFATAL\u0000C53300\u0000Msorry, too many clients already\u0000Fproc.c\u0000\u0000'))
  const said = { code: '53300', message: 'sorry, too many clients already', legacy: false }
  t.strictSame(read([refusal]), { heard: [said], reading: false })
  t.strictSame(read([refusal.subarray(0, 3), refusal.subarray(3)]), { heard: [said], reading: false }, 'cut anywhere')
})

// PostgreSQL's postmaster, when it cannot start a backend, writes "E" and a line of text: libpq
// knows it by a length no ErrorResponse has. It is a refusal, not another protocol.
t.test('a postmaster\'s text-only error is a refusal, however the network cuts it', async (t) => {
  const legacy = Buffer.from('Ecould not fork new process for connection: Resource temporarily unavailable\n\u0000')
  const said = { message: 'could not fork new process for connection: Resource temporarily unavailable', legacy: true }
  t.strictSame(read([legacy]), { heard: [said], reading: false })
  t.strictSame(read([legacy.subarray(0, 3), legacy.subarray(3, 20), legacy.subarray(20)]), { heard: [said], reading: false }, 'in three chunks')
})

t.test('another protocol\'s answer is foreign, at its first byte or its first length, and the reading stops', async (t) => {
  t.strictSame(read([Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n')]), { heard: ['foreign'], reading: false }, 'an HTTP server')
  t.strictSame(read([Buffer.from('SSH-2.0-OpenSSH_9.2\r\n')]), { heard: ['foreign'], reading: false }, 'an SSH server: a ParameterStatus type, a length of 1.4 GB')
  t.strictSame(read([Buffer.from('-ERR unknown command\r\n')]), { heard: ['foreign'], reading: false }, 'Redis')
  // Inside the socket's data event, a throw would end the process.
  t.strictSame(read([message('K', int32s(4242))]), { heard: ['foreign'], reading: false }, 'a key message of the wrong length')
})

t.test('a startup answer still coming: nothing said yet, still reading', async (t) => {
  t.strictSame(read([startup.subarray(0, 30)]), { heard: [], reading: true })
})

// The first answer after ReadyForQuery (src/db/connector.ts): a pooler that logged the connection
// in from its cache and cannot serve it closes it with a FATAL, which is why no connection could
// be had; a refusal within the session (ERROR) and any other answer are the query's own.
t.test('a FATAL that the first answer after ReadyForQuery starts with is a refusal; an ERROR or rows are not', async (t) => {
  const fatal = message('E', Buffer.from('SFATAL\u0000C08P01\u0000Mserver login has been failing, try again later (server_login_retry)\u0000\u0000'))
  t.strictSame(fatalAnswer(fatal), { code: '08P01', message: 'server login has been failing, try again later (server_login_retry)', legacy: false })
  const error = message('E', Buffer.from('SERROR\u0000VERROR\u0000C25006\u0000Mcannot execute INSERT in a read-only transaction\u0000\u0000'))
  t.equal(fatalAnswer(error), undefined, 'an ERROR')
  t.equal(fatalAnswer(message('T', int32s(0))), undefined, 'rows')
  t.equal(fatalAnswer(fatal.subarray(0, 10)), undefined, 'a FATAL cut short: nothing to read')
})
