// Bytes allocated per GET /users/me, by the frame that allocated them: the built app in this
// process (production profile, logs to /dev/null) over a fresh database, loaded over HTTP from
// core 1 while V8's sampling heap profiler counts every allocation, collected ones included.
// Allocation hardly moves with the machine's speed, unlike CPU time, so it suits a change to the
// request path on a noisy machine. V8 charges what an inlined function allocates to its caller.
// With `survivors`, only what outlived the young generation (promoted, then collected by a
// mark-compact or still live): the objects that make the old generation grow and its collections pause.
// Usage: npm run build && taskset -c 0 node --max-semi-space-size=8 bench/me-heap.js [seconds = 5] [frames = 25] [all | survivors]
import { Session } from 'node:inspector/promises'
import { runNode, startInProcessApp } from './lib.js'

const [seconds = '5', frames = '25', which = 'all'] = process.argv.slice(2)
const port = 18795
const { login, token, close } = await startInProcessApp('ums_meheap', { port })
try {
  // SPEC's own-info request, as bench/run.js sends it.
  const load = (duration) => runNode('bench/load.js', [JSON.stringify({
    connections: 32, duration, url: `http://127.0.0.1:${port}/users/me`, method: 'GET',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(login)
  })], { cpu: '1' })
  await load(3)
  const session = new Session()
  session.connect()
  await session.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: which !== 'survivors' })
  const figures = await load(Number(seconds))
  const { profile } = await session.post('HeapProfiler.stopSampling')
  if (figures.non2xx > 0 || figures.errors > 0) throw new Error(`${figures.non2xx} non-2xx answers, ${figures.errors} errors`)

  const bytes = new Map()
  let total = 0
  const walk = (node) => {
    const { functionName, url, lineNumber } = node.callFrame
    const frame = `${functionName || '(anonymous)'} ${url.replace(/.*node_modules\//, '').replace(/.*\/dist\//, 'dist/')}:${lineNumber + 1}`
    bytes.set(frame, (bytes.get(frame) ?? 0) + node.selfSize)
    total += node.selfSize
    node.children.forEach(walk)
  }
  walk(profile.head)
  // Answers to requests still in flight when the load stopped are not counted: a small overcount.
  console.log(`${figures.ok} answers, ${(total / figures.ok / 1024).toFixed(1)} KB ${which === 'survivors' ? 'outlived the young generation' : 'allocated'} an answer; the frames that allocated most:`)
  for (const [frame, size] of [...bytes].sort((a, b) => b[1] - a[1]).slice(0, Number(frames))) console.log(`${String(Math.round(size / figures.ok)).padStart(7)} B  ${frame}`)
} finally {
  await close()
}
