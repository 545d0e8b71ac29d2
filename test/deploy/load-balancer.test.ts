import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { createPostgresDatabase, errorBodies } from '../helper.js'
import { securityEvents, startHaproxy, startInstances, startRedis } from './cluster.js'
import { findProgram, transpileService, until } from './processes.js'
import { client, freshAddress, newUser, signUpUntilRefused, steadyTraffic, summary, type Account, type Outcome } from './traffic.js'

// Three production processes, HAProxy and Redis on a busy two-core machine.
t.setTimeout(600_000)

// The real thing: deploy/haproxy.cfg in front of three production instances (argon2 at
// OWASP's minimum: production refuses less) over one PostgreSQL database and a Redis of the
// test's own. Each client connects from its own loopback address, as users behind their own
// public addresses; HAProxy itself reaches the instances from 127.0.0.1, the one TRUST_PROXY
// address.

const skip = !process.env.TEST_DATABASE_URL
  ? 'TEST_DATABASE_URL is not set: load-balancer test skipped (it needs PostgreSQL)'
  : !findProgram('haproxy')
      ? 'haproxy is not installed (apt-get install -y haproxy; .ci/run does it): load-balancer test skipped'
      : !findProgram('redis-server')
          ? 'redis-server is not installed (apt-get install -y redis-server): load-balancer test skipped'
          : false

const { tooMany: TOO_MANY, badCredentials } = errorBodies
const TOKEN_MISSING = { statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }
const BALANCER = '127.0.0.1'

/** The first failures, each with who answered: the service sets X-Request-Id, HAProxy does not. */
const describe = (failures: readonly Outcome[]) => failures.slice(0, 10).map((f) => f.status === undefined
  ? `${f.op}: no answer (${f.error})`
  : `${f.op}: ${f.status} from ${f.headers['x-request-id'] ? 'the service' : 'HAProxy'} ${JSON.stringify(f.body)}`).join('\n')

t.test('behind HAProxy: three production instances, one PostgreSQL, one Redis', { skip }, async (t) => {
  const server = await transpileService(t)
  const databaseUrl = await createPostgresDatabase(t)
  const redis = await startRedis(t)
  const cluster = await startInstances(t, 3, { server, databaseUrl, redisUrl: redis.url, trustProxy: BALANCER })
  const balancer = await startHaproxy(t, cluster.instances, cluster)
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  t.teardown(() => sql.end())
  const { instances } = cluster

  // Five users, each on a client with its own address and a kept-alive connection to HAProxy.
  const accounts: Account[] = await Promise.all(Array.from({ length: 5 }, async (_, i) => {
    const user = newUser()
    const signup = await client(balancer.port, freshAddress(), false).send('signup', 'POST', '/auth/signup', { body: user })
    if (signup.status !== 201) throw new Error(`setup sign-up: ${signup.status} ${JSON.stringify(signup.body)}\n${balancer.output()}`)
    const own = client(balancer.port, `127.0.2.${i + 1}`)
    t.teardown(() => own.close())
    const login = await own.send('login', 'POST', '/auth/login', { body: { email: user.email, password: user.password } })
    if (login.status !== 200) throw new Error(`setup login: ${login.status} ${JSON.stringify(login.body)}\n${balancer.output()}`)
    return { ...user, id: signup.body.id, token: login.body.token, client: own }
  }))

  /** Every sign-up the clients saw acknowledged is in the database with the id they were given. */
  async function stored (acknowledged: ReadonlyArray<{ id: number, email: string }>) {
    const emails = acknowledged.map((a) => a.email)
    const rows = emails.length === 0 ? [] : await sql<Array<{ id: number, email: string }>>`select id, email from users where email in ${sql(emails)}`
    const byEmail = (a: { email: string }, b: { email: string }) => a.email.localeCompare(b.email)
    return { rows: rows.map((r) => ({ id: r.id, email: r.email })).sort(byEmail), acknowledged: [...acknowledged].sort(byEmail) }
  }

  /** The ids the database gave the accounts of these e-mails. */
  const storedIds = async (emails: string[]) =>
    new Map((emails.length === 0 ? [] : await sql<Array<{ id: number, email: string }>>`select id, email from users where email in ${sql(emails)}`).map((row) => [row.email, row.id]))

  /** Sign-ups of one client: each 201 the account it sent with its stored id, then the contract's 429 with Retry-After. */
  async function assertSignedUpThenRefused (t: Test, answers: Awaited<ReturnType<typeof signUpUntilRefused>>, message: string) {
    const accepted = answers.slice(0, -1)
    const ids = await storedIds(accepted.map((a) => a.user.email))
    t.strictSame(accepted.map((a) => [a.status, a.body]), accepted.map((a) => [201, { id: ids.get(a.user.email), username: a.user.username, email: a.user.email }]), `${message}: each 201 the stored account`)
    const refused = answers.at(-1)
    t.strictSame([refused?.status, refused?.body], [429, TOO_MANY], `${message}: then 429`)
    t.match(refused?.headers['retry-after'], /^[1-9][0-9]*$/, `${message}: with Retry-After`)
  }

  await t.test('one request id in the balancer\'s log line and the service\'s: HAProxy\'s own when the client sent none, the client\'s otherwise', async (t) => {
    const from = client(balancer.port, freshAddress(), false)
    const unnamed = await from.send('me', 'GET', '/users/me')
    t.strictSame([unnamed.status, unnamed.body], [401, TOKEN_MISSING], 'no request id sent: the contract\'s 401')
    const id = String(unnamed.headers['x-request-id'])
    // A UUID either way: HAProxy's line below shows it captured the header, so HAProxy made it.
    t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i, 'an id HAProxy made (its uuid())')
    const named = await from.send('me', 'GET', '/users/me', { headers: { 'x-request-id': 'client-chosen-7' } })
    t.strictSame([named.status, named.body], [401, TOKEN_MISSING], 'the client\'s request id: the contract\'s 401')
    t.equal(named.headers['x-request-id'], 'client-chosen-7', 'the client\'s own id is kept')
    for (const reqId of [id, 'client-chosen-7']) {
      await until(`HAProxy logs ${reqId}`, () => balancer.output().includes(`{${reqId}}`), 5000)
      await until(`an instance logs ${reqId}`, () => instances.some((instance) => instance.process.stdout().includes(`"reqId":"${reqId}"`)), 5000)
      t.pass(`${reqId}: in HAProxy's line and in the service's`)
    }
  })

  await t.test('the balancer\'s log line holds no query string, and no path segment that may hold an e-mail (CONTRACT §7)', async (t) => {
    const from = client(balancer.port, freshAddress(), false)
    const sent: Array<[string, string, string]> = [
      ['lb-log-query', '/users/me?access_token=eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl&email=victim@example.com', 'GET /users/me HTTP/1.1'],
      ['lb-log-at', '/nope/victim@example.com/x', 'GET /nope/[redacted]/x HTTP/1.1'],
      ['lb-log-escaped', '/nope/victim%40example.com', 'GET /nope/[redacted] HTTP/1.1']
    ]
    for (const [reqId, path, logged] of sent) {
      const answer = await from.send('me', 'GET', path, { headers: { 'x-request-id': reqId } })
      t.strictSame([answer.status, answer.body], [401, TOKEN_MISSING], `${reqId}: the contract's 401`)
      await until(`HAProxy logs ${reqId}`, () => balancer.output().includes(`{${reqId}}`), 5000)
      const line = balancer.output().split('\n').find((l) => l.includes(`{${reqId}}`))!
      t.ok(line.endsWith(`"${logged}"`), `${reqId}: the request line as ${logged}: ${line}`)
      t.notMatch(line, /victim|access_token|eyJ/, `${reqId}: nothing of the query or the e-mail`)
    }
  })

  await t.test('the sign-up limit counts each real client address across the instances; a forged X-Forwarded-For changes nothing', async (t) => {
    const a = client(balancer.port, '127.0.0.2')
    const answers = await signUpUntilRefused(a, 21)
    t.strictSame(answers.map((o) => o.status), [...Array(20).fill(201), 429], 'client A: 20 sign-ups, then 429')
    await assertSignedUpThenRefused(t, answers, 'client A')
    await until('A\'s sign-ups logged', () => securityEvents(instances, 'user_created').filter((e) => e.clientAddress === '127.0.0.2').length === 20, 5000)
    const perInstance = instances.map((i) => securityEvents(instances, 'user_created').filter((e) => e.clientAddress === '127.0.0.2' && e.instance === i.name).length)
    t.ok(perInstance.every((n) => n > 0), `A's sign-ups went to every instance (${perInstance.join(', ')}), one counter`)

    const b = client(balancer.port, '127.0.0.3')
    const user = newUser()
    const other = await b.send('signup', 'POST', '/auth/signup', { body: user })
    t.strictSame([other.status, other.body], [201, { id: (await storedIds([user.email])).get(user.email), username: user.username, email: user.email }], 'client B, another address, still signs up')

    // HAProxy appends the real peer to whatever the client wrote; the service takes the right-most untrusted entry.
    const forged = ['203.0.113.7', BALANCER, 'foo', '198.51.100.1, 127.0.0.1', '10.0.0.1']
    const c = client(balancer.port, '127.0.0.4')
    const spoofed = await signUpUntilRefused(c, 21, (i) => ({ 'x-forwarded-for': forged[i % forged.length] }))
    t.strictSame(spoofed.map((o) => o.status), [...Array(20).fill(201), 429], 'client C, forging X-Forwarded-For on every request: 20, then 429')
    await assertSignedUpThenRefused(t, spoofed, 'client C')
    await until('C\'s sign-ups logged', () => securityEvents(instances, 'user_created').filter((e) => e.clientAddress === '127.0.0.4').length === 20, 5000)
    const forgedAddresses = new Set(forged.flatMap((f) => f.split(', ')))
    const underForged = securityEvents(instances, 'user_created').filter((e) => forgedAddresses.has(e.clientAddress))
    t.strictSame(underForged, [], 'the service logged C\'s sign-ups under C\'s real address, none under a forged one')
    const all = [...answers, other, ...spoofed]
    t.comment(`sign-up limits: ${all.length} requests, slowest answer ${summary(all).slowest} ms`)
    a.close()
    b.close()
    c.close()
  })

  await t.test('rolling restart under steady traffic: every request answered with its contract status, every acknowledged sign-up stored', async (t) => {
    const traffic = steadyTraffic(balancer.port, accounts)
    await sleep(1000)
    for (const instance of instances) {
      const signalAt = Date.now()
      instance.process.child.kill('SIGTERM')
      await balancer.waitState(instance.name, 'DOWN', 10_000)
      const downAfter = Date.now() - signalAt
      t.ok(downAfter < 5000, `HAProxy took ${instance.name} out ${downAfter} ms after SIGTERM, within the 5 s drain`)
      t.strictSame(await instance.process.exited, { code: 0, signal: null }, `${instance.name} exits 0`)
      await cluster.restart(instance)
      await balancer.waitState(instance.name, 'UP')
      t.pass(`${instance.name} is back in rotation ${Date.now() - signalAt} ms after SIGTERM`)
    }
    await sleep(1000)
    const { requests, failures, slowest } = await traffic.stop()
    t.comment(`rolling restart: ${requests} requests, ${failures.length} failures, slowest answer ${slowest} ms`)
    t.strictSame(failures, [], `no connection error, no 5xx, no other status\n${describe(failures)}`)
    t.ok(traffic.acknowledged.length > 0, `${traffic.acknowledged.length} sign-ups acknowledged`)
    const check = await stored(traffic.acknowledged)
    t.strictSame(check.rows, check.acknowledged, 'every acknowledged sign-up is in the database')
  })

  await t.test('Redis stopped and restarted under traffic', async (t) => {
    const traffic = steadyTraffic(balancer.port, accounts)
    await sleep(1000)
    await redis.stop()
    const stoppedAt = Date.now()
    await sleep(1000)

    await t.test('while Redis is down, failed logins are still limited, on each instance\'s counters', async (t) => {
      // 10 failures per (address, e-mail) on each of the three instances: refused by the 31st at the latest.
      const d = client(balancer.port, '127.0.0.5')
      const answers: Outcome[] = []
      for (let i = 0; i < 31 && answers.at(-1)?.status !== 429; i++) {
        answers.push(await d.send('login', 'POST', '/auth/login', { body: { email: 'nobody@example.com', password: 'Wrong1234' } }))
      }
      const locked = answers.at(-1)
      t.strictSame([locked?.status, locked?.body], [429, TOO_MANY], `refused after ${answers.length - 1} failures`)
      t.ok(answers.length - 1 >= 10, 'not before one instance\'s 10')
      t.match(locked?.headers['retry-after'], /^[1-9][0-9]*$/, 'with Retry-After')
      t.strictSame(answers.slice(0, -1).map((a) => [a.status, a.body]), answers.slice(0, -1).map(() => [401, badCredentials]), 'every earlier attempt the contract\'s 401')
      d.close()
    })

    await t.test('while Redis is down, sign-ups are still limited, on each instance\'s counters', async (t) => {
      // 20 per address on each of the three instances: refused by the 61st at the latest.
      const answers = await signUpUntilRefused(client(balancer.port, '127.0.0.6', false), 61)
      const accepted = answers.filter((o) => o.status === 201).length
      t.equal(answers.at(-1)?.status, 429, `a 429 after ${accepted} sign-ups`)
      t.ok(accepted <= 60, `${accepted} sign-ups accepted: at most 20 on each instance`)
      t.ok(accepted >= 20, 'and at least one instance\'s 20')
      await assertSignedUpThenRefused(t, answers, 'Redis down')
    })

    const duringOutage = traffic.outcomes.filter((o) => o.startedAt >= stoppedAt)
    await redis.start()
    await until('the three instances back on Redis', async () => await redis.clients() >= 3, 15_000)
    await sleep(500)

    await t.test('once Redis is back, the instances count together again', async (t) => {
      const answers = await signUpUntilRefused(client(balancer.port, '127.0.0.7', false), 21)
      t.strictSame(answers.map((o) => o.status), [...Array(20).fill(201), 429], '20 sign-ups through three instances, then 429')
      await assertSignedUpThenRefused(t, answers, 'Redis back')
    })

    await sleep(500)
    const { requests, failures, slowest } = await traffic.stop()
    const outage = summary(duringOutage)
    const hashing = traffic.outcomes.filter((o) => o.op !== 'me').reduce((max, o) => Math.max(max, o.ms), 0)
    t.comment(`Redis outage: ${requests} requests (${outage.requests} while down), ${failures.length} failures, slowest answer ${slowest} ms (sign-up or login ${hashing} ms)`)
    t.strictSame(failures, [], `every request answered with its contract status, Redis down or not\n${describe(failures)}`)
    t.ok(hashing < 3000, `logins and sign-ups answered within 3 s (slowest ${hashing} ms)`)
    t.ok(outage.requests > 0 && duringOutage.some((o) => o.op === 'signup') && duringOutage.some((o) => o.op === 'login'), 'logins and sign-ups were sent while Redis was down')
  })

  // Last, so that no restart is needed after it. The window runs from 2 s before the kill to
  // 12 s after HAProxy marked the instance down.
  await t.test('kill -9 of one instance under traffic: few failures, none once HAProxy marked it down', async (t) => {
    const victim = instances[1]
    const traffic = steadyTraffic(balancer.port, accounts)
    await sleep(2000)
    victim.process.child.kill('SIGKILL')
    const killedAt = Date.now()
    await balancer.waitState(victim.name, 'DOWN', 10_000)
    const markedDownAt = Date.now()
    await sleep(12_000)
    const { requests, failures, slowest } = await traffic.stop()
    t.comment(`kill -9: ${requests} requests, ${failures.length} failed (${failures.map((f) => f.status ?? f.error).join(', ') || 'none'}), slowest answer ${slowest} ms; out of rotation ${markedDownAt - killedAt} ms after the kill`)
    t.ok(failures.length <= requests / 100, `${failures.length} failures: at most 1 % of ${requests}\n${describe(failures)}`)
    t.strictSame(failures.filter((f) => f.startedAt >= markedDownAt), [], 'no failure among requests sent once HAProxy marked it down')
    const check = await stored(traffic.acknowledged)
    t.strictSame(check.rows, check.acknowledged, 'every acknowledged sign-up is in the database')
  })
})
