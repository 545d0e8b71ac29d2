import postgres from 'postgres'
import t from 'tap'
import { createPostgresDatabase } from '../helper.js'
import { freePort, http, spawnServer, TEST_SECRET, waitReady } from '../server-process.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: migrations need PostgreSQL'

// Instances that start together wait for each other's migrations (CONTRACT §2): a wait, or a
// migration, longer than Fastify's 10 s plugin timeout once stopped the start with
// `AVV_ERR_PLUGIN_EXEC_TIMEOUT ... 'db'`, naming no cause, and the next start failed alike.
t.test('an instance whose migrations wait 12 s on another\'s lock says why, then starts and serves', { skip }, async (t) => {
  t.setTimeout(90_000)
  const url = await createPostgresDatabase(t)
  // The lock another instance's migrator holds (src/db/migrate.ts), held here for 12 s.
  const other = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => other.end({ timeout: 1 }))
  const holding = other.reserve()
  const held = await holding
  await held`select pg_advisory_lock(727001)`
  const [port, managementPort] = [await freePort(), await freePort()]
  const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(port), MANAGEMENT_PORT: String(managementPort), JWT_SECRET: TEST_SECRET, DATABASE_URL: url, RATE_LIMITS: 'off' })
  await new Promise((resolve) => setTimeout(resolve, 12_000))
  // One JSON line of the production log, and nothing on stderr.
  const lines = started.stdout().trim().split('\n').map((line) => JSON.parse(line) as { level: number, msg: string })
  t.strictSame(lines.map(({ level, msg }) => ({ level, msg })), [{ level: 40, msg: 'Waiting for another instance\'s migrations to finish (PostgreSQL advisory lock 727001): the start goes on then' }])
  t.equal(started.stderr(), '')
  await held`select pg_advisory_unlock(727001)`
  held.release()

  await waitReady(started, 30_000)
  const signedUp = await http(port, 'POST', '/auth/signup', { body: { username: 'patient', email: 'patient@example.com', password: 'Secreto123' } })
  t.strictSame([signedUp.status, signedUp.json()], [201, { id: 1, username: 'patient', email: 'patient@example.com' }])
  started.child.kill('SIGTERM')
  t.strictSame(await started.exited, { code: 0, signal: null })
})
