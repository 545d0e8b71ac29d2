import { readFileSync } from 'node:fs'
import t from 'tap'

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

// server.ts gives close-with-grace SHUTDOWN_DRAIN_MS + 10 s for in-flight requests + 5 s to
// close; systemd must wait longer, or it kills the instance mid-drain.
t.test('the systemd unit waits out the service\'s own shutdown, with the drain the docs advise for slow balancers', async (t) => {
  const server = read('src/server.ts')
  t.match(server, /const DRAIN_IN_FLIGHT_MS = 10_000\n/, 'in-flight bound as assumed here')
  t.match(server, /delay: config\.shutdownDrainMs \+ DRAIN_IN_FLIGHT_MS \+ 5_000,/, 'close-with-grace bound as assumed here')
  const advisedDrainMs = Number(/SHUTDOWN_DRAIN_MS=(\d+)/.exec(read('docs/operations.md'))?.[1])
  t.equal(advisedDrainMs, 15_000)
  const stopSeconds = Number(/^TimeoutStopSec=(\d+)$/m.exec(read('deploy/user-management.service'))?.[1])
  t.ok(stopSeconds * 1000 > advisedDrainMs + 10_000 + 5_000, `TimeoutStopSec=${stopSeconds} outlasts ${advisedDrainMs} + 15,000 ms`)
})

// Each start that finds the database refusing exits 1 within a second (README: the supervisor
// starts it again); with systemd's default start limit the unit gave up after five.
t.test('the systemd unit restarts a failed start for as long as it takes, a second apart', async (t) => {
  const unit = read('deploy/user-management.service')
  const unitSection = unit.slice(unit.indexOf('[Unit]'), unit.indexOf('[Service]'))
  t.match(unitSection, /^StartLimitIntervalSec=0$/m, 'no start limit ([Unit], where systemd reads it)')
  t.match(unit, /^Restart=on-failure$/m)
  t.match(unit, /^RestartSec=1$/m)
})
