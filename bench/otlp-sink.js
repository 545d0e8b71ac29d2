// A stand-in collector for the tracing benches: takes OTLP/HTTP exports and answers 200, or
// (black-holed) reads them and never answers. It counts what it took, nothing more.
import { createServer } from 'node:http'

export async function startOtlpSink () {
  let blackHole = false
  let exports = 0
  let bytes = 0
  const sockets = new Set()
  const server = createServer((request, response) => {
    request.on('data', (chunk) => { bytes += chunk.length })
    request.on('end', () => {
      exports++
      if (!blackHole) response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.on('connection', (socket) => { sockets.add(socket); socket.on('close', () => sockets.delete(socket)) })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const endpoint = `http://127.0.0.1:${server.address().port}`
  return {
    /** The service's variables that turn tracing on, its spans sent here, sampled by `sampler`. */
    tracingEnv: (sampler = 'always_on', ratio) => ({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'ums-bench', OTEL_TRACES_SAMPLER: sampler, ...(ratio ? { OTEL_TRACES_SAMPLER_ARG: ratio } : {})
    }),
    setBlackHole (on) { blackHole = on },
    taken: () => ({ exports, bytes }),
    async close () {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  }
}
