import { mkdir, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { DOCUMENT_PATH, generateDocument } from './document.js'

// Writes docs/openapi.json for `npm run openapi`, which then has openapi-typescript write test/openapi/api.d.ts.
// test/openapi/document.test.ts and client.test.ts fail when either is stale.
await mkdir(dirname(DOCUMENT_PATH), { recursive: true })
await writeFile(DOCUMENT_PATH, await generateDocument())
process.stdout.write(`wrote ${DOCUMENT_PATH}\n`)
