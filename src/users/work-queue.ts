import { serviceUnavailable } from '../http/errors.js'

export interface WorkQueueOptions {
  /** Jobs running at once. */
  readonly concurrency: number
  /** Jobs allowed to wait for a slot; one more is refused at once. */
  readonly maxQueue: number
  /** Longest wait for a slot before the job is refused. */
  readonly maxWaitMs: number
  /** What the jobs are, in the refusal's `reason` (the log's cause). */
  readonly name: string
}

export type WorkQueue = <T>(job: () => Promise<T>) => Promise<T>

interface Waiter { start: () => void, timer: NodeJS.Timeout }

/**
 * Bounds expensive work (argon2): a flood of logins turns into fast 503s instead of a
 * queue that grows without end and starves every other request of the thread pool.
 */
export function createWorkQueue ({ concurrency, maxQueue, maxWaitMs, name }: WorkQueueOptions): WorkQueue {
  // The 503 says why in the log: a full queue is load, not a fault.
  const refused = (reason: string) => serviceUnavailable(`${name}: ${reason}`)
  let running = 0
  const queue: Waiter[] = []

  const acquire = (): Promise<void> | undefined => {
    if (running < concurrency) {
      running++
      return undefined
    }
    if (queue.length >= maxQueue) return Promise.reject(refused(`all ${concurrency} running, ${maxQueue} waiting`))
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        start: resolve,
        timer: setTimeout(() => {
          queue.splice(queue.indexOf(waiter), 1)
          reject(refused(`no slot within ${maxWaitMs} ms`))
        }, maxWaitMs)
      }
      queue.push(waiter)
    })
  }

  const release = (): void => {
    const next = queue.shift()
    if (next) {
      clearTimeout(next.timer)
      next.start() // the slot passes straight to the next job
    } else {
      running--
    }
  }

  return async (job) => {
    await acquire()
    try {
      return await job()
    } finally {
      release()
    }
  }
}
