import t from 'tap'
import { freePort, spawnServer, TEST_SECRET } from '../server-process.js'

const skip = process.env.TEST_DATABASE_URL ? false : 'TEST_DATABASE_URL is not set: the start needs PostgreSQL'

// What a new user following the README met (issue 23): a codes-only line for each mistake. Each
// now names its cause in the server's words, on one line, with exit code 1 (CONTRACT §7).
const server = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const cases: Array<[string, string, RegExp]> = [
  ['a role that does not exist', `postgres://nobody_here@${server.host}/postgres`, /^Startup failed: PostgresError 28000: role "nobody_here" does not exist$/],
  ['a database that does not exist', `postgres://postgres@${server.host}/no_such_database`, /^Startup failed: PostgresError 3D000: database "no_such_database" does not exist$/],
  ['a host name that does not resolve', 'postgres://app@db.invalid/users', /^Startup failed: Error ENOTFOUND: getaddrinfo ENOTFOUND db\.invalid$/]
]
// With several hosts postgres.js retries a first query for good while no host takes it: the start
// once failed after Fastify's 10 s plugin timeout with a line that named no cause, and the CLI hung.
const [refused1, refused2] = [await freePort(), await freePort()]
cases.push(['several hosts, none of which takes a connection', `postgres://app@127.0.0.1:${refused1},127.0.0.1:${refused2}/users`,
  new RegExp(`^Startup failed: StartTimeoutError UMS_DB_NO_HOST: no host of 127\\.0\\.0\\.1:${refused1}, 127\\.0\\.0\\.1:${refused2} took a connection; the last failure: connect ECONNREFUSED 127\\.0\\.0\\.1:(${refused1}|${refused2})$`)])
for (const [what, url, line] of cases) {
  t.test(`${what}: exit 1 and one line that says so`, { skip }, async (t) => {
    const started = spawnServer(t, { APP_PROFILE: 'production', PORT: String(await freePort()), MANAGEMENT_PORT: 'off', JWT_SECRET: TEST_SECRET, DATABASE_URL: url })
    t.strictSame(await started.exited, { code: 1, signal: null })
    const lines = started.stderr().trim().split('\n')
    t.equal(lines.length, 1, lines.join(' | '))
    t.match(lines[0], line)
  })
}
