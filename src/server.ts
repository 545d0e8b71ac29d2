import closeWithGrace from 'close-with-grace'
import { ConfigError, loadConfig } from './config.js'
import { buildApp } from './app.js'
import { loggerOptions } from './logger.js'

let config
try {
  config = loadConfig(process.env)
} catch (error) {
  if (!(error instanceof ConfigError)) throw error
  process.stderr.write(`${error.message}\n`)
  process.exit(1)
}

const app = await buildApp(config, { logger: loggerOptions(config) })

closeWithGrace({ delay: 10_000 + config.shutdownDrainMs, logger: app.log }, async ({ signal, err }) => {
  if (err) app.log.error({ err }, 'uncaught error, shutting down')
  app.log.info({ signal }, 'shutting down')
  await app.close()
})

await app.listen({ port: config.port, host: config.host })
