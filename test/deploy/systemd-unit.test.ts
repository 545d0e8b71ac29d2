import { readFileSync } from 'node:fs'
import t from 'tap'

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

// server.ts gives close-with-grace SHUTDOWN_DRAIN_MS + 10 s for in-flight requests + 5 s to
// close; systemd must wait longer, or it kills the instance mid-drain.
t.test('the systemd unit waits out the service\'s own shutdown, with the drain the docs advise for slow balancers', async (t) => {
  const server = read('src/server.ts')
  t.match(server, /const IN_FLIGHT_MS = 10_000\n/, 'in-flight bound as assumed here')
  t.match(server, /delay: config\.shutdownDrainMs \+ IN_FLIGHT_MS \+ 5_000,/, 'close-with-grace bound as assumed here')
  const advisedDrainMs = Number(/SHUTDOWN_DRAIN_MS=(\d+)/.exec(read('docs/operations.md'))?.[1])
  t.equal(advisedDrainMs, 15_000)
  const stopSeconds = Number(/^TimeoutStopSec=(\d+)$/m.exec(read('deploy/user-management.service'))?.[1])
  t.ok(stopSeconds * 1000 > advisedDrainMs + 10_000 + 5_000, `TimeoutStopSec=${stopSeconds} outlasts ${advisedDrainMs} + 15,000 ms`)
})
