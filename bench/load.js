// The load generator, in a process of its own (run.js pins it to the other core): one
// autocannon run, its summary printed as one JSON line. For sign-up every request carries a
// new account, so each one really creates a user.
// Usage: node bench/load.js '{"url":"http://127.0.0.1:8080/users/me","method":"GET","headers":{},"body":"{}","connections":32,"duration":10}'
import autocannon from 'autocannon'

const spec = JSON.parse(process.argv[2])
const options = {
  url: spec.url,
  connections: spec.connections ?? 32,
  duration: spec.duration ?? 10,
  method: spec.method ?? 'GET',
  headers: spec.headers ?? {},
  body: spec.body
}
if (spec.signupPrefix) {
  let n = 0
  options.requests = [{
    method: 'POST',
    setupRequest (request) {
      // Usernames of at most 20 characters, unique per run: prefix + counter in base 36.
      const tag = `${spec.signupPrefix}${(n++).toString(36)}`
      return { ...request, body: JSON.stringify({ username: tag, email: `${tag}@bench.example.com`, password: 'Secreto123' }) }
    }
  }]
}

const result = await autocannon(options)
const seconds = result.duration
process.stdout.write(JSON.stringify({
  seconds,
  ok: result['2xx'],
  non2xx: result.non2xx,
  errors: result.errors,
  timeouts: result.timeouts,
  perSecond: result['2xx'] / seconds,
  latency: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max, mean: result.latency.average },
  bytesPerSecond: result.throughput.total / seconds,
  statusCodes: result.statusCodeStats
}) + '\n')
