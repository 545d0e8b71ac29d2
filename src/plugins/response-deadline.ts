import fp from 'fastify-plugin'
import type { FastifyReply } from 'fastify'
import { httpError } from '../error-bodies.js'
import { messages } from '../messages.js'

/** CONTRACT §7: no request waits longer than this for its answer to start. */
export const RESPONSE_DEADLINE_MS = 10_000
// Checked this often, so an answer starts before the deadline, not just after it.
const TICK_MS = 250

/**
 * The backstop behind every other timeout: a request whose answer has not started
 * RESPONSE_DEADLINE_MS after it arrived gets 503 `Servicio no disponible` (a listing already
 * streaming has started, and may take longer). Requests are kept in arrival order and checked
 * from the oldest on a timer, so a fast request costs one array push.
 */
export default fp<{ deadlineMs?: number }>(async function responseDeadlinePlugin (app, { deadlineMs = RESPONSE_DEADLINE_MS }) {
  let pending: Array<{ reply: FastifyReply, at: number }> = []
  const timer = setInterval(() => {
    const overdue = Date.now() - (deadlineMs - TICK_MS)
    let first = 0
    for (; first < pending.length; first++) {
      const { reply, at } = pending[first]
      if (reply.sent || reply.raw.headersSent) continue
      if (at > overdue) break
      // A body still arriving is the client's delay: Node's request timeout answers it with 408.
      if (reply.request.raw.complete === false) continue
      reply.header('retry-after', '1').code(503).send(httpError(503, messages.unavailable))
    }
    pending = first === 0 ? pending : pending.slice(first).filter(({ reply }) => !reply.sent && !reply.raw.headersSent && !reply.raw.destroyed)
  }, TICK_MS)
  timer.unref()
  app.addHook('onClose', async () => clearInterval(timer))
  // Callback hooks on every request's path: no promise to make and settle.
  app.addHook('onRequest', (_request, reply, done) => {
    pending.push({ reply, at: Date.now() })
    done()
  })
}, { fastify: '5.x', name: 'response-deadline' })
