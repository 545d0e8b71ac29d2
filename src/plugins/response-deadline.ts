import fp from 'fastify-plugin'
import type { FastifyReply } from 'fastify'
import { sendUnavailable } from '../http/error-bodies.js'
import { createArrivalQueue } from '../http/arrival-queue.js'

/** CONTRACT §7: no request waits longer than this for its answer to start. */
export const RESPONSE_DEADLINE_MS = 10_000
// Checked this often, so an answer starts before the deadline, not just after it.
const TICK_MS = 250

declare module 'fastify' {
  interface FastifyReply {
    /** The request's number in the response deadline's queue. */
    deadlineSeq: number
  }
}

/**
 * The backstop behind every other timeout: a request whose answer has not started
 * RESPONSE_DEADLINE_MS after it arrived gets 503 `Servicio no disponible` (a listing already
 * streaming has started, and may take longer). Requests wait in an arrival queue, checked from
 * the oldest on a timer; each leaves it when its answer starts, so a finished request is not
 * held (with its socket and buffers) until the next tick, where it would outlive the young
 * generation (src/http/arrival-queue.ts).
 */
export default fp<{ deadlineMs?: number }>(async function responseDeadlinePlugin (app, { deadlineMs = RESPONSE_DEADLINE_MS }) {
  const pending = createArrivalQueue<FastifyReply>()
  const timer = setInterval(() => {
    pending.sweep(Date.now() - (deadlineMs - TICK_MS), (reply) => {
      if (reply.sent || reply.raw.headersSent || reply.raw.destroyed) return 'drop'
      // A body still arriving is the client's delay: Node's request timeout answers it with 408.
      if (reply.request.raw.complete === false) return 'keep'
      sendUnavailable(reply)
      reply.log.warn({ deadlineMs }, 'no answer had started at the deadline: answered 503 (the backstop of CONTRACT §7)')
      // Taken out of Fastify's hands: the handler's late result is dropped, where Fastify would
      // warn that the reply was sent, quoting the request's URL with its query string.
      reply.hijack()
      return 'drop'
    })
  }, TICK_MS)
  timer.unref()
  app.addHook('onClose', async () => clearInterval(timer))
  app.decorateReply('deadlineSeq', -1)
  // Callback hooks on every request's path: no promise to make and settle.
  app.addHook('onRequest', (_request, reply, done) => {
    reply.deadlineSeq = pending.add(reply, Date.now())
    done()
  })
  // Every answer passes here; one that never does (its client left) is dropped by the timer.
  app.addHook('onSend', (_request, reply, payload, done) => {
    pending.remove(reply.deadlineSeq)
    done(null, payload)
  })
}, { fastify: '5.x', name: 'response-deadline' })
