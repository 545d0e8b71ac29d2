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
