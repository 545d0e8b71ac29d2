import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { createBatchedLineStream } from '../src/log-stream.js'

t.test('the lines of one event-loop turn leave in one write, in order', async (t) => {
  const writes: string[] = []
  const stream = createBatchedLineStream({ write: (text: string) => writes.push(text) })
  stream.write('{"n":1}\n')
  stream.write('{"n":2}\n')
  stream.write('{"n":3}\n')
  t.same(writes, [], 'nothing is written while the turn runs')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(writes, ['{"n":1}\n{"n":2}\n{"n":3}\n'])

  stream.write('{"n":4}\n')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(writes, ['{"n":1}\n{"n":2}\n{"n":3}\n', '{"n":4}\n'], 'a later turn gets a write of its own')
})

t.test('flush writes what is pending at once, and nothing twice', async (t) => {
  const writes: string[] = []
  const stream = createBatchedLineStream({ write: (text: string) => writes.push(text) })
  stream.write('{"last":true}\n')
  stream.flush()
  t.same(writes, ['{"last":true}\n'])
  await new Promise((resolve) => setImmediate(resolve))
  t.same(writes, ['{"last":true}\n'], 'the scheduled flush finds nothing left')
})

t.test('lines still pending when the process exits are written', async (t) => {
  const module = new URL('../src/log-stream.ts', import.meta.url).href
  const script = `import { batchedStdout } from ${JSON.stringify(module)}; batchedStdout().write('{"bye":1}\\n'); process.exit(0)`
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script])
  t.equal(stdout, '{"bye":1}\n')
})
