import { createHmac, createPublicKey, generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { calculateJwkThumbprint } from 'jose'
import { DEV_JWT_SECRET, loadConfig } from '../../src/config/index.js'
import { jwkThumbprint } from '../../src/config/signing-keys.js'
import { spawnServer } from '../server-process.js'

// JWT_ALGORITHM, JWT_PRIVATE_KEY and JWT_PRIVATE_KEY_PREVIOUS (CONTRACT §1 with issue 15).
const pkcs8 = (key: { export: Function }) => key.export({ format: 'pem', type: 'pkcs8' }) as string
const ed25519 = () => pkcs8(generateKeyPairSync('ed25519').privateKey)
const ec = (namedCurve: string) => pkcs8(generateKeyPairSync('ec', { namedCurve }).privateKey)
const edKey = ed25519()
const p256Key = ec('P-256')
const production = { APP_PROFILE: 'production', DATABASE_URL: 'postgres://db.internal:5432/users' }
const folder = mkdtempSync(join(tmpdir(), 'jwt-keys-'))
const keyFile = join(folder, 'jwt.pem')
writeFileSync(keyFile, edKey, { mode: 0o600 })

t.test('HS256 stays the default; its digest key is derived from the secret, never the secret itself', async (t) => {
  const { jwt } = loadConfig({})
  t.match(jwt, { algorithm: 'HS256', secret: DEV_JWT_SECRET, previousSecret: undefined, keys: undefined })
  const secret = 'x'.repeat(40)
  const { digestKey } = loadConfig({ JWT_ALGORITHM: 'HS256', JWT_SECRET: secret }).jwt
  // RFC 5869's HKDF-SHA256 with no salt, written out with createHmac: extract, then one expand block.
  const prk = createHmac('sha256', Buffer.alloc(32)).update(secret).digest()
  t.equal(digestKey, createHmac('sha256', prk).update(Buffer.concat([Buffer.from('user-management e-mail digest'), Buffer.from([1])])).digest('hex'))
  t.not(digestKey, loadConfig({ JWT_SECRET: 'y'.repeat(40) }).jwt.digestKey, 'another secret, another digest key')
})

t.test('EdDSA and ES256 load the key inline or from a file, with its thumbprint as kid', async (t) => {
  const inline = loadConfig({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey }).jwt
  const fromFile = loadConfig({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: keyFile }).jwt
  const expectedKid = await calculateJwkThumbprint(createPublicKey(edKey).export({ format: 'jwk' }) as never, 'sha256')
  t.equal(inline.algorithm, 'EdDSA')
  t.equal(inline.secret, '', 'no HS256 secret')
  t.equal(inline.keys?.current.kid, expectedKid)
  t.equal(fromFile.keys?.current.kid, expectedKid, 'the file gives the same key')
  t.equal(inline.keys?.previous, undefined)
  t.equal(fromFile.digestKey, inline.digestKey, 'the digest key depends on the key only')
  t.match(inline.digestKey, /^[0-9a-f]{64}$/)
  t.not(inline.digestKey, loadConfig({ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: ed25519() }).jwt.digestKey, 'another key, another digest key')

  const es = loadConfig({ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: p256Key, JWT_PRIVATE_KEY_PREVIOUS: ec('prime256v1') }).jwt
  t.equal(es.keys?.current.kid, await calculateJwkThumbprint(createPublicKey(p256Key).export({ format: 'jwk' }) as never, 'sha256'))
  t.ok(es.keys?.previous, 'a previous key')
  t.ok(Object.isFrozen(es.keys?.current.publicJwk), 'frozen with the rest of the configuration')
})

t.test('production needs no JWT_SECRET with an asymmetric algorithm', async (t) => {
  t.equal(loadConfig({ ...production, JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey }).jwt.algorithm, 'EdDSA')
  t.throws(() => loadConfig({ ...production, JWT_ALGORITHM: 'HS256', JWT_SECRET: 'short-secret' }),
    { name: 'ConfigError', message: 'Invalid configuration: JWT_SECRET must be at least 32 bytes long in production' }, 'HS256 still refuses weak secrets')
})

t.test('jwkThumbprint is RFC 7638\'s, as jose computes it', async (t) => {
  for (const pem of [edKey, p256Key, ed25519(), ec('P-256')]) {
    const jwk = createPublicKey(pem).export({ format: 'jwk' })
    t.equal(jwkThumbprint(jwk), await calculateJwkThumbprint(jwk as never, 'sha256'))
  }
})

const publicPem = createPublicKey(edKey).export({ format: 'pem', type: 'spki' }) as string
const encrypted = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: 'p' }) as string
const badCases: [string, Record<string, string>, string | RegExp][] = [
  ['an unknown algorithm', { JWT_ALGORITHM: 'RS256' }, 'JWT_ALGORITHM must be one of HS256, EdDSA, ES256 (got "RS256")'],
  ['no key', { JWT_ALGORITHM: 'EdDSA' }, 'JWT_PRIVATE_KEY is required with JWT_ALGORITHM=EdDSA (npm run cli -- generate-key EdDSA)'],
  ['a P-256 key for EdDSA', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: p256Key }, 'JWT_PRIVATE_KEY is of type ec (prime256v1); JWT_ALGORITHM=EdDSA needs an Ed25519 key'],
  ['an Ed25519 key for ES256', { JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: edKey }, 'JWT_PRIVATE_KEY is of type ed25519; JWT_ALGORITHM=ES256 needs an EC key on the P-256 curve'],
  ['a P-384 key for ES256', { JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: ec('P-384') }, 'JWT_PRIVATE_KEY is of type ec (secp384r1); JWT_ALGORITHM=ES256 needs an EC key on the P-256 curve'],
  ['an RSA key for ES256', { JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: pkcs8(generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey) }, 'JWT_PRIVATE_KEY is of type rsa; JWT_ALGORITHM=ES256 needs an EC key on the P-256 curve'],
  ['a public key', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: publicPem }, 'JWT_PRIVATE_KEY holds a public key or certificate; it must be the private key (PKCS#8 PEM)'],
  ['a garbled PEM', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\nnot-base64\n-----END PRIVATE KEY-----\n' }, 'JWT_PRIVATE_KEY is not a readable unencrypted PKCS#8 PEM private key (ERR_OSSL_UNSUPPORTED)'],
  ['an encrypted key', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: encrypted }, // OpenSSL's code for it differs between a terminal and a pipe.
    /^JWT_PRIVATE_KEY is not a readable unencrypted PKCS#8 PEM private key \(ERR_[A-Z_]+\)$/],
  ['a missing file', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: join(folder, 'missing.pem') }, 'JWT_PRIVATE_KEY is neither a PEM key (starting with -----BEGIN) nor the path of a readable file (ENOENT)'],
  ['a folder', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: folder }, 'JWT_PRIVATE_KEY is neither a PEM key (starting with -----BEGIN) nor the path of a readable file (EISDIR)'],
  ['a previous key of another type', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey, JWT_PRIVATE_KEY_PREVIOUS: p256Key }, 'JWT_PRIVATE_KEY_PREVIOUS is of type ec (prime256v1); JWT_ALGORITHM=EdDSA needs an Ed25519 key'],
  ['a public previous key', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey, JWT_PRIVATE_KEY_PREVIOUS: publicPem }, 'JWT_PRIVATE_KEY_PREVIOUS holds a public key or certificate; it must be the private key (PKCS#8 PEM)'],
  ['the same key twice', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey, JWT_PRIVATE_KEY_PREVIOUS: keyFile }, 'JWT_PRIVATE_KEY_PREVIOUS is the same key as JWT_PRIVATE_KEY; give the former key, or unset it'],
  ['JWT_SECRET with EdDSA', { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: edKey, JWT_SECRET: 'x'.repeat(40) }, 'JWT_SECRET is not used with JWT_ALGORITHM=EdDSA (tokens are signed with JWT_PRIVATE_KEY); unset it'],
  ['JWT_SECRET_PREVIOUS with ES256', { JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: p256Key, JWT_SECRET_PREVIOUS: 'x'.repeat(40) }, 'JWT_SECRET_PREVIOUS is not used with JWT_ALGORITHM=ES256 (tokens are signed with JWT_PRIVATE_KEY); unset it'],
  ['JWT_PRIVATE_KEY without JWT_ALGORITHM', { JWT_PRIVATE_KEY: edKey }, 'JWT_PRIVATE_KEY is used only with JWT_ALGORITHM EdDSA or ES256; set JWT_ALGORITHM, or unset it'],
  ['JWT_PRIVATE_KEY_PREVIOUS with HS256', { JWT_ALGORITHM: 'HS256', JWT_PRIVATE_KEY_PREVIOUS: edKey }, 'JWT_PRIVATE_KEY_PREVIOUS is used only with JWT_ALGORITHM EdDSA or ES256; set JWT_ALGORITHM, or unset it']
]

t.test('each bad key setting is one ConfigError naming the variable', async (t) => {
  for (const [name, env, message] of badCases) {
    let error: Error | undefined
    try {
      loadConfig(env)
    } catch (thrown) {
      error = thrown as Error
    }
    t.equal(error?.name, 'ConfigError', name)
    const [prefix, problem] = [error?.message.slice(0, 23), error?.message.slice(23) ?? '']
    t.equal(prefix, 'Invalid configuration: ', `${name}: the one-line form`)
    if (typeof message === 'string') t.equal(problem, message, `${name}: the message`)
    else t.match(problem, message, `${name}: the message`)
    t.notOk(problem.includes('KEY-----') || problem.includes('\n'), `${name}: one line, the key not echoed`)
  }
})

t.test('the server exits 1 with that one line', async (t) => {
  for (const [name, env, message] of [badCases[2], badCases[6]] as [string, Record<string, string>, string][]) {
    const server = spawnServer(t, { MANAGEMENT_PORT: 'off', ...env })
    t.strictSame(await server.exited, { code: 1, signal: null }, `${name}: exit 1`)
    t.equal(server.stderr(), `Invalid configuration: ${message}\n`, `${name}: one line`)
  }
})
