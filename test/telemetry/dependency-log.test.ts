import pino from 'pino'
import t from 'tap'
import { dependencyWatch } from '../../src/telemetry/dependency-log.js'
import { captureLog } from '../helper.js'

const messages = { down: 'the dependency does not answer', back: 'the dependency answers again' }

function watched () {
  const log = captureLog()
  const clock = { now: 0 }
  const watch = dependencyWatch(pino({ level: 'info' }, log.stream), messages, () => clock.now)
  const lines = () => log.lines.map((line) => [line.level, line.msg, line.err?.code, line.outagesNotLogged])
  return { watch, clock, lines }
}
const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
const shuttingDown = Object.assign(new Error('the database system is shutting down'), { code: '57P03' })

// Readiness said nothing of a second outage within a minute, and its end up to a minute late.
t.test('two outages within a minute: each one\'s start and end, at once', async (t) => {
  const { watch, clock, lines } = watched()
  for (const at of [0, 4000, 16_000, 20_000]) {
    clock.now = at
    if (at % 16_000 === 0) watch.failed(refused)
    else watch.answered()
  }
  t.strictSame(lines(), [
    [40, messages.down, 'ECONNREFUSED', undefined], [30, messages.back, undefined, undefined],
    [40, messages.down, 'ECONNREFUSED', undefined], [30, messages.back, undefined, undefined]
  ])
})

t.test('within one outage, each other cause once a minute; the same cause not again', async (t) => {
  const { watch, clock, lines } = watched()
  for (const error of [shuttingDown, shuttingDown, refused, refused, shuttingDown]) {
    watch.failed(error)
    clock.now += 1000
  }
  clock.now = 62_000
  watch.failed(refused)
  watch.answered()
  t.strictSame(lines(), [
    [40, messages.down, '57P03', undefined], [40, messages.down, 'ECONNREFUSED', undefined],
    [40, messages.down, 'ECONNREFUSED', undefined], [30, messages.back, undefined, undefined]
  ])
})

// A dependency failing every other call (a collector refusing big batches) wrote a pair a call.
t.test('flapping: two outages said a minute, the others counted on the next one said', async (t) => {
  const { watch, clock, lines } = watched()
  for (; clock.now < 30_000; clock.now += 1000) {
    if (clock.now % 2000 === 0) watch.failed(refused)
    else watch.answered()
  }
  t.strictSame(lines(), [
    [40, messages.down, 'ECONNREFUSED', undefined], [30, messages.back, undefined, undefined],
    [40, messages.down, 'ECONNREFUSED', undefined], [30, messages.back, undefined, undefined]
  ], '15 outages in 30 s: two said')
  // An outage that begins while the minute is full is said as soon as it has room.
  watch.failed(refused)
  clock.now = 61_000
  watch.failed(refused)
  watch.answered()
  t.strictSame(lines().slice(4), [[40, messages.down, 'ECONNREFUSED', 13], [30, messages.back, undefined, undefined]], 'the next one said counts those that were not')
})
