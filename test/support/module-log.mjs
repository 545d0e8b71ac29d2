// `node --import ./test/support/module-log.mjs …`: at exit, one stderr line `MODULES [...]` listing
// every module the process loaded, ESM (seen by a resolve hook) and CommonJS (require.cache).
import { createRequire, register } from 'node:module'
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads'

const { port1, port2 } = new MessageChannel()
port1.unref()
register('./module-log-hooks.mjs', { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] })
const require = createRequire(import.meta.url)

process.on('exit', () => {
  const urls = new Set(Object.keys(require.cache))
  for (let message = receiveMessageOnPort(port1); message; message = receiveMessageOnPort(port1)) urls.add(message.message)
  // A pipe: written at once, before the process ends.
  process.stderr.write(`MODULES ${JSON.stringify([...urls])}\n`)
})
