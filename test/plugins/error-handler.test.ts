import sensible from '@fastify/sensible'
import Fastify from 'fastify'
import t from 'tap'
import errorHandler from '../../src/plugins/error-handler.js'
import { DuplicateUserError, ServiceUnavailableError } from '../../src/http/errors.js'
import { ajvOptions } from '../../src/http/validation.js'
import { SignupBody } from '../../src/schemas/users.js'

// The plugin alone, on a bare instance: each kind of error becomes the contract's body.
t.test('validation, duplicates, outages, the unknown and the unmatched, each in the contract\'s shape', async (t) => {
  const app = Fastify({ ajv: ajvOptions })
  await app.register(sensible)
  await app.register(errorHandler)
  app.post('/signup', { schema: { body: SignupBody } }, async () => ({}))
  app.get('/duplicate', async () => { throw new DuplicateUserError(['email', 'username']) })
  app.get('/busy', async () => { throw new ServiceUnavailableError() })
  app.get('/database', async () => { throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })
  app.get('/bug', async () => { throw new TypeError('x is undefined, select * from users') })
  t.teardown(() => app.close())

  const invalid = await app.inject({ method: 'POST', url: '/signup', payload: { username: 'ab', email: 'ana@example.com', password: 'Secreto123' } })
  t.strictSame([invalid.statusCode, invalid.json()], [400, { username: 'El username debe tener entre 3 y 20 caracteres' }])
  const duplicate = await app.inject('/duplicate')
  t.strictSame([duplicate.statusCode, duplicate.json()], [409, { email: 'El email ya está registrado', username: 'El username ya está en uso' }])
  for (const url of ['/busy', '/database']) {
    const response = await app.inject(url)
    t.strictSame([response.statusCode, response.headers['retry-after'], response.json()], [503, '1', { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }], url)
  }
  const bug = await app.inject('/bug')
  t.strictSame([bug.statusCode, bug.json()], [500, { statusCode: 500, error: 'Internal Server Error', message: 'Error interno del servidor' }], 'nothing of the error echoed')
  const unmatched = await app.inject('/nowhere')
  t.strictSame([unmatched.statusCode, unmatched.json()], [404, { statusCode: 404, error: 'Not Found', message: 'Recurso no encontrado' }])
})
