import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { build, seedAccounts, uniqueUser } from '../helper.js'
import { DOCUMENT_PATH } from './document.js'
import { useTheApi } from './typed-client.js'

const run = promisify(execFile)
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url))
const bin = (name: string) => fileURLToPath(new URL(`../../node_modules/.bin/${name}`, import.meta.url))

t.test('test/openapi/api.d.ts is what openapi-typescript makes of docs/openapi.json', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ums-openapi-ts-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await run(bin('openapi-typescript'), [DOCUMENT_PATH, '-o', join(dir, 'api.d.ts')], { timeout: 120_000 })
  t.equal(await readFile(join(dir, 'api.d.ts'), 'utf8'), await readFile(here('api.d.ts'), 'utf8'),
    'stale: run `npm run openapi` and commit the result')
})

t.test('the typed client type-checks with tsc --strict (natural calls pass, wrong ones do not)', async (t) => {
  const args = ['--noEmit', '--strict', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node', '--skipLibCheck', here('typed-client.ts')]
  const result = await run(bin('tsc'), args, { timeout: 180_000 }).then(({ stdout }) => stdout, (error: { stdout?: string }) => error.stdout ?? String(error))
  t.equal(result, '', 'tsc reports nothing')
})

t.test('the typed client signs up, logs in, reads /users/me with and without the body, lists users', async (t) => {
  const app = await build(t, 'pglite')
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const account = uniqueUser('client')
  const { signUp, logIn, me, meWithBody, users, userRole } = await useTheApi(`http://127.0.0.1:${port}`, account, seedAccounts.admin)

  t.equal(signUp.status, 201)
  const id = (signUp.data as { id: number }).id
  t.strictSame(signUp, { status: 201, data: { id, username: account.username, email: account.email }, error: undefined })
  t.equal(logIn.status, 200)
  const token = (logIn.data as { token: string }).token
  t.strictSame(logIn, { status: 200, data: { id, token, username: account.username, email: account.email }, error: undefined })
  const record = { id, username: account.username, email: account.email, role: 'ROLE_USER' }
  t.strictSame(me, { status: 200, data: record, error: undefined }, 'without a body')
  t.strictSame(meWithBody, { status: 200, data: record, error: undefined }, 'with SPEC\'s body')
  t.equal(userRole, 'ROLE_USER')
  const { admin, user } = seedAccounts
  t.strictSame(users, { status: 200, data: [admin, user, record].map(({ id, username, email, role }) => ({ id, username, email, role })), error: undefined })
})
