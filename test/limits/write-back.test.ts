import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createMemoryStore } from '../../src/limits/attempt-stores.js'
import type { SharedCounting } from '../../src/limits/shared-counting.js'
import { createWriteBack } from '../../src/limits/write-back.js'
import { ownRedisSkip, startOwnRedis } from './own-redis.js'
import { until } from '../deploy/processes.js'

const WINDOW = 15 * 60_000
const counting = { isShared: () => false, lost: () => {} } as unknown as SharedCounting

/** A client as the service configures it: a command unanswered for 250 ms fails. */
function client (t: Test, url: string) {
  const redis = new Redis(url, { commandTimeout: 250, maxRetriesPerRequest: 0, enableOfflineQueue: false })
  redis.on('error', () => {})
  t.teardown(() => redis.disconnect())
  return redis
}

/** Polls until the client's connection is ready again (after a start or a restart). */
const connected = (redis: Redis) => until('Redis connected', () => redis.status === 'ready', 20_000)

/** The counters a write-back script carried, per call: a spy on the command it defined. */
function spyOnScripts (redis: Redis, before = () => {}) {
  const calls: number[] = []
  const commands = redis as unknown as { limitsWriteBack: (numKeys: number, ...args: unknown[]) => Promise<number> }
  const original = commands.limitsWriteBack.bind(redis)
  commands.limitsWriteBack = async (numKeys, ...args) => {
    before()
    calls.push(numKeys - 2)
    return await original(numKeys, ...args)
  }
  return calls
}

t.test('the write-back', { skip: ownRedisSkip }, async (t) => {
  t.test('a Redis that lost its keys gets every local counter, in batches, one script at a time', async (t) => {
    const own = await startOwnRedis(t)
    const redis = client(t, own.url)
    await connected(redis)
    const local = createMemoryStore()
    const writeBack = createWriteBack(redis, local, { prefix: 'wb:', counting, windowMs: WINDOW, batchSize: 500 })
    t.strictSame(await writeBack.catchUp(), 0, 'the first catch-up learns the epoch')
    for (let i = 0; i < 1200; i++) local.hold(`wb:{login}:pair:${i}`, 10, 60_000)
    await own.stop()
    await own.restart()
    await connected(redis)
    const calls = spyOnScripts(redis)
    t.equal(await writeBack.catchUp(), 1200)
    t.strictSame(calls, [500, 500, 200], 'three scripts of at most 500 counters')
    const values = await redis.mget('wb:{login}:pair:0', 'wb:{login}:pair:1199')
    t.strictSame(values, ['10', '10'], 'each lock carried')
    const ttl = await redis.pttl('wb:{login}:pair:600')
    t.ok(ttl > 50_000 && ttl <= 60_000, `with the time it had left (${ttl} ms)`)
    t.strictSame(await writeBack.catchUp(), 0, 'and carried once: Redis now has this instance\'s share')
  })

  t.test('a counter rebuilt from two instances\' shares ends with the earlier of them, whichever writes first', async (t) => {
    for (const order of [[0, 1], [1, 0]]) {
      const own = await startOwnRedis(t)
      const instances = [0, 1].map(() => {
        const redis = client(t, own.url)
        const local = createMemoryStore()
        return { redis, local, writeBack: createWriteBack(redis, local, { prefix: 'wb:', counting, windowMs: WINDOW }) }
      })
      for (const { redis, writeBack } of instances) {
        await connected(redis)
        await writeBack.catchUp()
      }
      // One holds the lock Redis reported, with Redis's minute left; the other counted a failure of
      // its own since, whose window here ends 10 minutes later.
      instances[0].local.hold('wb:{login}:pair:p', 10, 60_000)
      const taken = await instances[1].local.take([{ key: 'wb:{login}:pair:p', max: 10 }], 11 * 60_000)
      if (taken.status !== 'counted') throw new Error('not counted')
      await taken.attempt.finish('failure')
      await own.stop()
      await own.restart()
      for (const i of order) {
        await connected(instances[i].redis)
        await instances[i].writeBack.catchUp()
      }
      const ttl = await instances[0].redis.pttl('wb:{login}:pair:p')
      t.strictSame(await instances[0].redis.get('wb:{login}:pair:p'), '11', `order ${order}: both shares`)
      t.ok(ttl > 50_000 && ttl <= 60_000, `order ${order}: Redis's minute, not the later window (${ttl} ms)`)
      await own.stop()
    }
  })

  t.test('past its bound, what is not kept for Redis is said, and what is kept is written', async (t) => {
    const own = await startOwnRedis(t)
    const redis = client(t, own.url)
    await connected(redis)
    let full = 0
    const writeBack = createWriteBack(redis, createMemoryStore(), { prefix: 'wb:', counting, windowMs: WINDOW, maxEntries: 2, onFull: () => { full++ } })
    await writeBack.catchUp()
    writeBack.record([{ key: 'wb:{login}:pair:a', max: 10 }, { key: 'wb:{login}:email:a', max: 50 }], 'failure')
    writeBack.record([{ key: 'wb:{login}:pair:a', max: 10 }], 'failure')
    t.equal(full, 0, 'two counters kept')
    writeBack.record([{ key: 'wb:{login}:pair:b', max: 10 }], 'failure')
    t.equal(full, 1, 'a third is not, and says so')
    t.equal(await writeBack.catchUp(), 2)
    t.strictSame(await redis.mget('wb:{login}:pair:a', 'wb:{login}:email:a', 'wb:{login}:pair:b'), ['2', '1', null])
  })

  t.test('a batch whose answer never came is sent again and applied once', async (t) => {
    const own = await startOwnRedis(t)
    const redis = client(t, own.url)
    await connected(redis)
    const local = createMemoryStore()
    const writeBack = createWriteBack(redis, local, { prefix: 'wb:', counting, windowMs: WINDOW })
    await writeBack.catchUp()
    const counters = [{ key: 'wb:{login}:pair:a', max: 10 }, { key: 'wb:{login}:email:a', max: 50 }]
    for (let i = 0; i < 3; i++) writeBack.record(counters, 'failure')
    // Paused between the epoch's answer and the script: the script waits in Redis's socket.
    let pauses = 1
    const calls = spyOnScripts(redis, () => { if (pauses-- > 0) own.pause() })
    await t.rejects(writeBack.catchUp(), { message: 'Command timed out' }, 'unanswered while Redis is paused')
    own.resume()
    for (let tries = 0; tries < 100; tries++) {
      const written = await writeBack.catchUp().catch(() => undefined)
      if (written !== undefined) break
      await sleep(100)
    }
    // Twice at least: on a loaded machine a resend may time out too, and be sent once more.
    t.ok(calls.length >= 2 && calls.every((counters) => counters === 2), `the same batch sent again (${calls.join(', ')})`)
    t.strictSame(await redis.mget(counters.map((c) => c.key)), ['3', '3'], 'the paused script ran when Redis resumed; sent again, it changed nothing')
  })
})
