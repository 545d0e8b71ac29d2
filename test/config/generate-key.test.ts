import { createPrivateKey } from 'node:crypto'
import t from 'tap'
import { loadConfig } from '../../src/config/index.js'
import { runCli as cli } from '../support/cli-process.js'

// `npm run cli -- generate-key`: a key for a secret store, so standard output holds the PEM and nothing else.
t.setTimeout(300_000)

const PEM = /^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+\n-----END PRIVATE KEY-----\n$/

for (const [algorithm, type, curve] of [['EdDSA', 'ed25519', undefined], ['ES256', 'ec', 'prime256v1']] as const) {
  t.test(`generate-key ${algorithm} prints one new PKCS#8 PEM key that JWT_PRIVATE_KEY accepts`, async (t) => {
    // JWT_ALGORITHM without a key yet: the state in which the first key is generated.
    const [first, second] = await Promise.all([cli(['generate-key', algorithm], { JWT_ALGORITHM: algorithm }), cli(['generate-key', algorithm])])
    t.equal(first.code, 0)
    t.equal(first.stderr, '')
    t.match(first.stdout, PEM)
    const key = createPrivateKey(first.stdout)
    t.equal(key.asymmetricKeyType, type)
    t.equal(key.asymmetricKeyDetails?.namedCurve, curve)
    t.equal(loadConfig({ JWT_ALGORITHM: algorithm, JWT_PRIVATE_KEY: first.stdout }).jwt.algorithm, algorithm)
    t.not(second.stdout, first.stdout, 'a new key each time')
  })
}

t.test('generate-key without an algorithm, with another one or extra words: usage, exit 1, nothing on stdout', async (t) => {
  for (const args of [['generate-key'], ['generate-key', 'RS256'], ['generate-key', 'eddsa'], ['generate-key', 'EdDSA', 'extra']]) {
    const run = await cli(args)
    t.equal(run.code, 1, args.join(' '))
    t.equal(run.stdout, '')
    t.match(run.stderr, /^generate-key takes EdDSA or ES256\nUsage: npm run cli -- <command> [\s\S]*generate-key EdDSA\|ES256/)
  }
})
