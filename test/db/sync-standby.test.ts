import t from 'tap'
import { until } from '../deploy/processes.js'
import { createPrimary, pgServersSkip } from '../support/pg-servers.js'
import { productionApp } from '../support/production-app.js'

t.setTimeout(300_000)

// statement_timeout does not bound a commit waiting for a synchronous standby: the answer
// deadline answers the request, and a cancel ends the backend's wait (src/db/postgres.ts).
t.test('commits waiting for a synchronous standby that is gone: 503 within the answer deadline, and no backend left waiting', { skip: pgServersSkip() }, async (t) => {
  const primary = await createPrimary(t)
  const { app } = await productionApp(t, primary.url())
  await primary.query("alter system set synchronous_standby_names = 'gone'")
  await primary.query('select pg_reload_conf()')
  const waiting = async () => (await primary.query("select count(*)::int as n from pg_stat_activity where wait_event = 'SyncRep'"))[0].n
  const started = Date.now()
  const answers = await Promise.all(['sync1', 'sync2'].map((username) =>
    app.inject({ method: 'POST', url: '/auth/signup', payload: { username, email: `${username}@example.com`, password: 'Secreto123' } })))
  const ms = Date.now() - started
  t.strictSame(answers.map((a) => [a.statusCode, a.json()]), answers.map(() => [503, { statusCode: 503, error: 'Service Unavailable', message: 'Servicio no disponible' }]))
  t.ok(ms < 7500, `answered after ${ms} ms`)
  await until('no backend waits for the standby', async () => await waiting() === 0, 5000)
  t.equal(await waiting(), 0)
})
