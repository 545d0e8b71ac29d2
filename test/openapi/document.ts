import { fileURLToPath } from 'node:url'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config/index.js'
import { openMigratedPglite } from '../../src/db/snapshot.js'

/** The committed document, produced by `npm run openapi`. */
export const DOCUMENT_PATH = fileURLToPath(new URL('../../docs/openapi.json', import.meta.url))

/**
 * The OpenAPI document as the app generates it from its route schemas, with the default
 * configuration (so its server is the development listener, http://127.0.0.1:8080), as text.
 */
export async function generateDocument (): Promise<string> {
  const config = loadConfig({ LOG_LEVEL: 'silent', MANAGEMENT_PORT: 'off' })
  const { database } = await openMigratedPglite()
  const app = await buildApp(config, { database, seed: false })
  try {
    await app.ready()
    return `${JSON.stringify(app.swagger(), null, 2)}\n`
  } finally {
    await app.close()
    await database.close()
  }
}
