import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { assertBadCredentials, build, captureLog, emailHmac, loginFrom, testConfig, testDatabases } from '../helper.js'

/** CONTRACT §7's e-mail digest, written out here: HMAC-SHA256 of the lower-cased e-mail under the digest key. */
// With EdDSA there is no JWT_SECRET: e-mail digests in the log and the login limiter's keys use
// the key derived from JWT_PRIVATE_KEY, the same in every instance that holds that key.
for (const kind of testDatabases()) {
  t.test(`e-mail digests and login limits in EdDSA mode on ${kind}`, async (t) => {
    const env = { JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, RATE_LIMITS: 'on' }
    const log = captureLog()
    const app = await build(t, kind, { env, logger: { level: 'info', stream: log.stream } })
    const digestKey = testConfig(env).jwt.digestKey
    const login = () => loginFrom(app, '203.0.113.90', 'Nadie@example.com', 'Otra12345')

    for (let i = 0; i < 10; i++) assertBadCredentials(t, await login())
    const locked = await login()
    t.equal(locked.statusCode, 429, 'the 11th attempt on the same (address, e-mail) is refused')
    t.strictSame(locked.json(), { statusCode: 429, error: 'Too Many Requests', message: 'Demasiados intentos, inténtelo más tarde' })
    const events = log.lines.filter((line) => line.event === 'authn_login_fail' || line.event === 'authn_login_lock')
    t.equal(events.length, 11)
    t.strictSame(events.map((line) => line.emailHmac), Array(11).fill(emailHmac(digestKey, 'nadie@example.com')), 'every event names the e-mail by the derived key\'s HMAC')
    t.notMatch(log.text(), /nadie@example/i, 'never in clear')
  })
}
