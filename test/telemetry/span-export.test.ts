import pino from 'pino'
import t from 'tap'
import { collectorWatch } from '../../src/telemetry/span-export.js'
import { captureLog } from '../helper.js'

// A collector that refuses big batches and takes small ones (or one bad replica behind a balancer)
// fails every other export: a warning and a recovery line for each was a line a batch.
t.test('a collector failing every other batch: two outages said a minute, not a line a batch', async (t) => {
  const log = captureLog()
  let now = 0
  const watch = collectorWatch(pino({ level: 'info' }, log.stream), () => now)
  for (let i = 0; i < 20; i++) {
    watch(i % 2 === 0 ? Object.assign(new Error('Request Entity Too Large'), { code: 413 }) : undefined)
    now += 1000
  }
  const down = [40, 'traces: the collector did not take a batch; its spans are dropped (otel_spans_dropped_total) until it does']
  const back = [30, 'traces: the collector takes batches again']
  t.strictSame(log.lines.map((line) => [line.level, line.msg]), [down, back, down, back])
})

// A batch black-holed before the collector came back, timing out after a later batch was taken,
// began an outage in the log that no later export ever ended.
t.test('a batch that fails after a later one was taken says nothing of the collector now', async (t) => {
  const { boundedExport } = await import('../../src/telemetry/span-export.js')
  const pending: Array<(result: { code: number, error?: Error }) => void> = []
  const exporter = { export: (_spans: unknown, done: (result: { code: number, error?: Error }) => void) => { pending.push(done) }, shutdown: async () => {} }
  const outcomes: Array<string | undefined> = []
  const dropped: number[] = []
  const bounded = boundedExport(exporter as never, { maxQueue: 10, onDropped: (_reason, count) => dropped.push(count), onExported: (error) => outcomes.push(error?.message) })
  for (let i = 0; i < 3; i++) bounded.export([], () => {})
  pending[1]({ code: 0 })
  pending[0]({ code: 1, error: new Error('timed out') })
  pending[2]({ code: 1, error: new Error('refused') })
  t.strictSame(outcomes, [undefined, 'refused'], 'the earlier batch\'s failure is not said; a later one\'s is')
  t.strictSame(dropped, [0, 0], 'both failed batches are counted as dropped')
})
