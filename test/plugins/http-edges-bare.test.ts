import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import t from 'tap'
import httpEdges from '../../src/plugins/http-edges.js'
import { RawConnection } from '../support/raw-http.js'

// The HTTP edges' plugin alone, on a bare instance with a stand-in for the metrics it depends on
// (the app's edges, Expect and the parser's refusals: test/plugins/http-edges.test.ts).
async function bareApp () {
  // As the app: requests during the close reach the hooks, which answer the contract's 503.
  const app = Fastify({ return503OnClosing: false })
  await app.register(fp(async (app) => { app.decorate('metrics', { observeRequest: () => {} } as never) }, { name: 'metrics' }))
  await app.register(httpEdges)
  // As the auth hook answers: before the body is read.
  app.post('/refuse', { onRequest: async (_request, reply) => reply.code(401).send({ refused: true }) }, async () => ({}))
  app.get('/slow', async () => { await sleep(300); return { slow: true } })
  app.get('/fast', async () => ({ fast: true }))
  return app
}

t.test('an answer sent before the body was read closes the connection, having read nothing more', async (t) => {
  const app = await bareApp()
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const early = await RawConnection.open((app.server.address() as { port: number }).port)
  early.send('POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{"a":')
  t.ok(await early.until(() => early.closed, 2000), 'closed without waiting for the rest of the body')
  t.strictSame(early.responses().map((r) => [r.status, r.headers.connection, JSON.parse(r.body)]), [[401, 'close', { refused: true }]])
})

t.test('a request in flight when the instance starts closing is answered with Connection: close', async (t) => {
  const app = await bareApp()
  await app.listen({ port: 0, host: '127.0.0.1' })
  const slow = await RawConnection.open((app.server.address() as { port: number }).port)
  slow.send('GET /slow HTTP/1.1\r\nhost: x\r\n\r\n')
  await sleep(50)
  const closing = app.close()
  t.ok(await slow.until(() => slow.responses().length === 1, 2000))
  t.strictSame(slow.responses().map((r) => [r.status, r.headers.connection, JSON.parse(r.body)]), [[200, 'close', { slow: true }]])
  await closing
})
