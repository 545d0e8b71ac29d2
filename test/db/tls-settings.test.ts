import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, connect, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'
import { negotiateTls, tlsSettings } from '../../src/db/tls.js'
import { connectTo } from '../../src/db/connect-to.js'
import { TLSSocket } from 'node:tls'
import { until } from '../deploy/processes.js'
import { createCertificates } from '../support/pg-certificates.js'
import { spawnSync } from 'node:child_process'

const skip = spawnSync('openssl', ['version']).status === 0 ? false : 'openssl is not installed: no certificates to load'

async function certificates (t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'ums-tls-settings-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return { dir, ...await createCertificates(dir, ['127.0.0.1']) }
}
const settings = (query: string) => tlsSettings(parseDatabaseUrl(`postgres://app@127.0.0.1:5432/users?${query}`))

// A broken pair used to pass the start and throw in a running instance's first handshake, out of
// any promise: the process ended with OpenSSL's stack trace.
t.test('a client certificate and a key that do not fit stop the start in one line naming the files, quoting nothing of them', { skip }, async (t) => {
  const { cert, key, dir } = await certificates(t)
  const otherKey = join(dir, 'test-ca.key')
  for (const mode of ['prefer', 'verify-full']) {
    t.throws(() => settings(`sslmode=${mode}&sslrootcert=${join(dir, 'test-ca.crt')}&sslcert=${cert}&sslkey=${otherKey}`), {
      message: `sslcert ${cert} and sslkey ${otherKey} cannot be used together (ERR_OSSL_X509_KEY_VALUES_MISMATCH)`
    }, mode)
  }
  t.ok(settings(`sslmode=require&sslcert=${cert}&sslkey=${key}`), 'a pair that fits is taken')
})

// libpq refuses such a key (fe-secure-openssl.c) and so does the service, rather than start with it.
t.test('a client key others can read is refused as libpq refuses it, naming the file and its mode', { skip }, async (t) => {
  const { cert, key, dir } = await certificates(t)
  const weak = (mode: string) => `sslkey ${key} has group or world access (mode ${mode}): libpq requires 0600 or less if owned by the service's user, 0640 or less if owned by root`
  for (const mode of [0o644, 0o640, 0o604]) {
    chmodSync(key, mode)
    t.throws(() => settings(`sslmode=require&sslcert=${cert}&sslkey=${key}`), { message: weak(`0${mode.toString(8)}`) }, mode.toString(8))
  }
  t.throws(() => settings(`sslmode=require&sslcert=${cert}&sslkey=${dir}`), { message: `sslkey ${dir} is not a regular file` })
  for (const mode of [0o600, 0o400]) {
    chmodSync(key, mode)
    t.ok(settings(`sslmode=require&sslcert=${cert}&sslkey=${key}`), `${mode.toString(8)} is taken`)
  }
})

// libpq verifies against sslrootcert, else ~/.postgresql/root.crt, else refuses: never against
// every public CA, with which verify-ca would take any publicly signed certificate for any name.
t.test('verify-ca and verify-full need a CA: sslrootcert, libpq\'s default file, or system with verify-full', { skip }, async (t) => {
  const { dir } = await certificates(t)
  const home = process.env.HOME
  t.teardown(() => { process.env.HOME = home })
  process.env.HOME = join(dir, 'home')
  for (const mode of ['verify-ca', 'verify-full']) {
    t.throws(() => settings(`sslmode=${mode}`), { message: `sslmode=${mode} needs sslrootcert: the file of the CA that signed the server's certificate, or system with verify-full (${join(dir, 'home', '.postgresql', 'root.crt')}, libpq's default, does not exist)` })
  }
  t.strictSame(Object.keys(settings('sslmode=verify-full&sslrootcert=system')!.options).sort(), ['rejectUnauthorized', 'secureContext'], 'system: Node\'s own CAs, no file')
  const notPem = join(dir, 'not-a-certificate.txt')
  writeFileSync(notPem, 'hello\n')
  t.throws(() => settings(`sslmode=verify-ca&sslrootcert=${notPem}`), { message: `sslrootcert ${notPem} holds no PEM certificate` })
})

// libpq's documented rule: with a root CA file, sslmode=require behaves as verify-ca.
t.test('require checks the chain against libpq\'s default CA file when it exists, as verify-ca (not the name)', { skip }, async (t) => {
  const { dir, ca } = await certificates(t)
  const home = process.env.HOME
  t.teardown(() => { process.env.HOME = home })
  process.env.HOME = join(dir, 'home')
  const checks = () => { const { options } = settings('sslmode=require')!; return [options.rejectUnauthorized, typeof options.checkServerIdentity] }
  t.strictSame(checks(), [false, 'undefined'], 'no CA file: encrypted, unchecked')
  mkdirSync(join(dir, 'home', '.postgresql'), { recursive: true })
  copyFileSync(ca, join(dir, 'home', '.postgresql', 'root.crt'))
  t.strictSame(checks(), [true, 'function'], 'with it: the chain checked, the name not')
})

t.test('a handshake that cannot start fails its connection, not the process', async (t) => {
  // A server that says yes to TLS; the options given cannot make a context.
  const server = createServer((socket) => { socket.once('data', () => socket.write('S')); socket.on('error', () => {}) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  const raw = connect(port, '127.0.0.1')
  await new Promise((resolve) => raw.once('connect', resolve))
  const outcome = await negotiateTls(raw, { host: '127.0.0.1', port }, 'require', { options: { key: 'not a key', cert: 'not a certificate' }, required: true })
    .then(() => 'connected', (error: { code?: string }) => error.code ?? 'failed')
  t.match(outcome, /^ERR_/, 'rejected with the error')
  t.ok(raw.destroyed, 'the socket is gone')
})

// libpq's prefer: "first try an SSL connection; if that fails, try a non-SSL connection".
t.test('with prefer, a handshake that fails is tried again without TLS; with require it fails naming the host', async (t) => {
  const firsts: string[] = []
  const server = createServer((socket) => {
    socket.on('error', () => {})
    socket.once('data', (first) => {
      const sslRequest = first.length === 8 && first.readUInt32BE(4) === 80877103
      firsts.push(sslRequest ? 'SSLRequest' : 'startup')
      // Yes to TLS, then, to the client's hello, bytes no TLS client can read.
      if (sslRequest) {
        socket.write('S')
        socket.once('data', () => socket.write('HTTP/1.1 400 Bad Request\r\n\r\n'))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  const target = { host: '127.0.0.1', port }
  const plain = await connectTo(target, 'prefer', settings('sslmode=prefer'), 2000)
  plain.write(Buffer.from([0, 0, 0, 8, 0, 3, 0, 0]))
  await until('the startup message arrives', () => firsts.length === 2, 2000)
  t.strictSame([firsts, plain instanceof TLSSocket], [['SSLRequest', 'startup'], false], 'the second connection in plain text')
  plain.destroy()
  const required = await connectTo(target, 'require', settings('sslmode=require'), 2000).then(() => 'connected', (error: Error & { code?: string }) => `${error.name} ${error.code}: ${error.message}`)
  t.match(required, new RegExp(`^TlsHandshakeError ERR_SSL_WRONG_VERSION_NUMBER: 127\\.0\\.0\\.1:${port} failed the TLS handshake: wrong version number$`))
})
