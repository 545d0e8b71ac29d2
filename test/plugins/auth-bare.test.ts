import sensible from '@fastify/sensible'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t from 'tap'
import authPlugin from '../../src/plugins/auth.js'
import errorHandler from '../../src/plugins/error-handler.js'
import { testConfig } from '../helper.js'

// The auth plugin alone, on a bare instance with a stand-in users repository (the app's routes:
// test/plugins/auth.test.ts).
t.test('one root hook: public routes open, protected ones need a token of a user that exists, roles per route', async (t) => {
  const app = Fastify()
  const ana = { id: 2, username: 'ana', email: 'ana@example.com', role: 'ROLE_USER' as const }
  await app.register(sensible)
  await app.register(fp(async (app) => {
    app.decorate('usersRepository', { findById: async (id: number) => id === ana.id ? ana : undefined } as never)
  }, { name: 'users' }))
  await app.register(authPlugin, { jwt: testConfig().jwt })
  await app.register(errorHandler)
  app.get('/open', { config: { public: true } }, async () => ({ open: true }))
  app.get('/mine', async (request) => request.account)
  app.get('/admin', { config: { role: 'ROLE_ADMIN' } }, async () => ({ admin: true }))
  t.teardown(() => app.close())
  await app.ready()
  const bearer = (claims: { uid: number, role: 'ROLE_USER' | 'ROLE_ADMIN' }) => ({ authorization: `Bearer ${app.jwt.sign({ sub: 'ana', jti: 'j1', ...claims })}` })

  const open = await app.inject('/open')
  t.strictSame([open.statusCode, open.json()], [200, { open: true }])
  const missing = await app.inject('/mine')
  t.strictSame([missing.statusCode, missing.headers['www-authenticate'], missing.json()], [401, 'Bearer', { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }])
  const mine = await app.inject({ url: '/mine', headers: bearer({ uid: 2, role: 'ROLE_USER' }) })
  t.strictSame([mine.statusCode, mine.json()], [200, ana], 'the account as stored now')
  const gone = await app.inject({ url: '/mine', headers: bearer({ uid: 3, role: 'ROLE_USER' }) })
  t.strictSame([gone.statusCode, gone.json()], [401, { statusCode: 401, error: 'Unauthorized', message: 'Token inválido' }], 'a deleted user\'s token')
  const forbidden = await app.inject({ url: '/admin', headers: bearer({ uid: 2, role: 'ROLE_USER' }) })
  t.strictSame([forbidden.statusCode, forbidden.json()], [403, { statusCode: 403, error: 'Forbidden', message: 'Acceso denegado' }])
  const tampered = await app.inject({ url: '/mine', headers: { authorization: `${bearer({ uid: 2, role: 'ROLE_USER' }).authorization.slice(0, -2)}xx` } })
  t.strictSame([tampered.statusCode, tampered.json()], [401, { statusCode: 401, error: 'Unauthorized', message: 'Token inválido' }])
})
