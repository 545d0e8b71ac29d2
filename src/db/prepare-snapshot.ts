// Run by npm's `prepare` (so by `npm ci`): builds the migrated PGlite snapshot now, so that the
// first `npm run dev` after a clone restores it instead of paying PGlite's cold start and the dump.
import { openMigratedPglite } from './snapshot.js'

const { database, source, file } = await openMigratedPglite()
await database.close()
console.log(source === 'created' ? `PGlite snapshot written: ${file}` : `PGlite snapshot up to date: ${file}`)
