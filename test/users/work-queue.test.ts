import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { createWorkQueue } from '../../src/users/work-queue.js'

const unavailable = (error: unknown) => `${(error as { code?: string }).code}: ${(error as { reason?: string }).reason}`

t.test('at most `concurrency` jobs run; the next waits and gets the slot of the one that ends', async (t) => {
  const run = createWorkQueue({ concurrency: 2, maxQueue: 4, maxWaitMs: 1000, name: 'test queue' })
  let running = 0
  let most = 0
  const job = (ms: number, value: number) => run(async () => {
    most = Math.max(most, ++running)
    await sleep(ms)
    running--
    return value
  })
  t.strictSame(await Promise.all([job(30, 1), job(30, 2), job(10, 3), job(10, 4)]), [1, 2, 3, 4], 'each job\'s own answer, in order')
  t.equal(most, 2)
})

t.test('beyond the queue a job is refused at once; past the wait, refused too; a failing job frees its slot', async (t) => {
  const run = createWorkQueue({ concurrency: 1, maxQueue: 1, maxWaitMs: 100, name: 'test queue' })
  const long = run(() => sleep(300, 'long'))
  const waiting = run(async () => 'waited').catch(unavailable)
  // At once: settled before the event loop's next turn, let alone a timer.
  const nextTurn = new Promise((resolve) => setImmediate(() => resolve('not at once')))
  t.equal(await Promise.race([run(async () => 'never').catch(unavailable), nextTurn]), 'UMS_SERVICE_UNAVAILABLE: test queue: all 1 running, 1 waiting', 'the queue is full: refused at once, saying so')
  t.equal(await waiting, 'UMS_SERVICE_UNAVAILABLE: test queue: no slot within 100 ms', 'waited past maxWaitMs: refused, saying so')
  t.equal(await long, 'long')
  await t.rejects(run(async () => { throw new Error('job failed') }), { message: 'job failed' })
  t.equal(await run(async () => 'free again'), 'free again', 'the failed job gave its slot back')
})
