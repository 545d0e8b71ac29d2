// Preloaded by bench/gc-mode.js into the service: its GC pauses by kind, and its old space every
// 250 ms, written as JSON to $GC_PROBE_DIR/gc-<pid>.json when it exits.
const { PerformanceObserver, constants } = require('node:perf_hooks')
const v8 = require('node:v8')
const fs = require('node:fs')
const stats = { minor: [], major: [], old: [] }
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const { kind } = e.detail
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) stats.minor.push([Math.round(e.startTime), +e.duration.toFixed(2)])
    else stats.major.push([Math.round(e.startTime), +e.duration.toFixed(2), kind])
  }
}).observe({ entryTypes: ['gc'] })
setInterval(() => {
  const old = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')
  stats.old.push([Math.round(performance.now()), +(old.space_used_size / 1048576).toFixed(1)])
}, 250).unref()
process.on('exit', () => fs.writeFileSync(`${process.env.GC_PROBE_DIR}/gc-${process.pid}.json`, JSON.stringify(stats)))
