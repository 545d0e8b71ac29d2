import Fastify, { type FastifyServerOptions } from 'fastify'
import t from 'tap'
import { dropForgedEntries } from '../../src/plugins/client-address.js'
import { assertSignedUp, assertTooMany, build, captureLog, errorBodies, testDatabases, uniqueUser } from '../helper.js'

const { badCredentials } = errorBodies

t.test('Fastify ignores a numeric trustProxy (GHSA-3m5p-2c4r-xxw2), which is why TRUST_PROXY refuses hop counts', async (t) => {
  const seen = async (trustProxy: number | string[]) => {
    // Fastify's types no longer list a number; its run time still takes one, and trusts nobody.
    const app = Fastify({ trustProxy: trustProxy as FastifyServerOptions['trustProxy'] })
    app.get('/', async (request) => ({ ip: request.ip }))
    t.teardown(() => app.close())
    const response = await app.inject({ url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': '198.51.100.7' } })
    return response.json().ip
  }
  t.equal(await seen(1), '10.0.0.1', 'a hop count: the balancer\'s address, for every client behind it')
  t.equal(await seen(['10.0.0.1']), '198.51.100.7', 'the balancer\'s address: the client it forwarded')
})

t.test('X-Forwarded-For is cut at its right-most entry that is not an IP address', async (t) => {
  t.equal(dropForgedEntries('198.51.100.7'), '198.51.100.7', 'addresses only: untouched')
  t.equal(dropForgedEntries('198.51.100.7, 2001:db8::1'), '198.51.100.7, 2001:db8::1')
  t.equal(dropForgedEntries('foo'), undefined)
  t.equal(dropForgedEntries('x'.repeat(8000)), undefined)
  t.equal(dropForgedEntries('198.51.100.7, foo'), undefined, 'the nearest trusted hop forwarded garbage')
  t.equal(dropForgedEntries('foo, 198.51.100.7,  203.0.113.9 '), '198.51.100.7, 203.0.113.9', 'what lies beyond the garbage is unreachable anyway')
  t.equal(dropForgedEntries('1.2.3.4:5678'), undefined, 'an address with a port is not an address')
  t.equal(dropForgedEntries(`fe80::1%${'a'.repeat(100)}`), undefined, 'nor one with a zone')
})

for (const kind of testDatabases()) {
  t.test(`a forwarded value that is not an IP address is ignored (CONTRACT §9) on ${kind}`, async (t) => {
    const log = captureLog()
    const app = await build(t, kind, { env: { RATE_LIMITS: 'on', TRUST_PROXY: '10.0.0.1' }, logger: { level: 'info', stream: log.stream } })
    const garbage = (i: number) => i % 2 === 0 ? `foo${i}` : `${i}`.padEnd(8000, 'x')
    const forwarded = (value: string) => ({ remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': value } })

    t.test('logins from a trusted hop that forwards garbage count on that hop\'s address', async (t) => {
      for (let i = 0; i < 10; i++) {
        const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nadie@example.com', password: 'Wrong12345' }, ...forwarded(garbage(i)) })
        t.equal(response.statusCode, 401)
        t.strictSame(response.json(), badCredentials)
      }
      const locked = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'nadie@example.com', password: 'Wrong12345' }, ...forwarded('bar') })
      assertTooMany(t, locked, 'the 11th: ten different garbage values were one client')
      const fails = log.lines.filter((line) => line.event === 'authn_login_fail')
      t.equal(fails.length, 10)
      t.strictSame([...new Set(fails.map((line) => line.clientAddress))], ['10.0.0.1'], 'the security events name the hop, not the garbage')
      t.ok(log.raw.every((line) => line.length < 1000), 'no log line carries the 8,000-character values')
    })

    t.test('sign-ups likewise: 20 with garbage from one hop, then 429', async (t) => {
      for (let i = 0; i < 20; i++) {
        const account = uniqueUser('xf')
        const response = await app.inject({ method: 'POST', url: '/auth/signup', payload: account, ...forwarded(garbage(i)) })
        await assertSignedUp(t, app, response, account)
      }
      const refused = await app.inject({ method: 'POST', url: '/auth/signup', payload: uniqueUser('xf'), ...forwarded(garbage(20)) })
      assertTooMany(t, refused, 'the 21st')
      const account = uniqueUser('xf')
      const real = await app.inject({ method: 'POST', url: '/auth/signup', payload: account, ...forwarded('198.51.100.20') })
      await assertSignedUp(t, app, real, account, 'a real forwarded address is still its own client')
    })

    t.test('garbage to the left of an untrusted address is never reached', async (t) => {
      const response = await app.inject({ method: 'POST', url: '/auth/login', payload: { email: 'alguien@example.com', password: 'Wrong12345' }, ...forwarded('foo, 198.51.100.30') })
      t.equal(response.statusCode, 401)
      t.strictSame(response.json(), badCredentials)
      t.equal(log.lines.filter((line) => line.event === 'authn_login_fail').at(-1)?.clientAddress, '198.51.100.30')
    })
  })
}

t.test('X-Forwarded-For without TRUST_PROXY is warned about once a minute, by address, with the limits on', async (t) => {
  const log = captureLog()
  const app = await build(t, 'pglite', { env: { RATE_LIMITS: 'on' }, logger: { level: 'info', stream: log.stream } })
  for (let i = 0; i < 3; i++) {
    const response = await app.inject({ method: 'GET', url: '/auth/x', remoteAddress: '10.0.0.9', headers: { 'x-forwarded-for': '198.51.100.7' } })
    t.equal(response.statusCode, 404)
    t.strictSame(response.json(), { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' })
  }
  t.strictSame(log.lines.filter((line) => line.level === 40).map(({ clientAddress, msg }) => ({ clientAddress, msg })),
    [{ clientAddress: '10.0.0.9', msg: 'X-Forwarded-For received while TRUST_PROXY is off: every client behind that proxy shares one set of abuse counters' }])
  const off = captureLog()
  const unlimited = await build(t, 'pglite', { env: { RATE_LIMITS: 'off' }, logger: { level: 'info', stream: off.stream } })
  const answer = await unlimited.inject({ method: 'GET', url: '/auth/x', headers: { 'x-forwarded-for': '198.51.100.7' } })
  t.strictSame([answer.statusCode, answer.json()], [404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }])
  t.strictSame(off.lines.filter((line) => line.level === 40), [], 'no counters, nothing shared')
})
