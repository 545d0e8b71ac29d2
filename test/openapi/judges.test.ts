import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { conformanceProblem } from './conformance.js'
import { DOCUMENT_PATH } from './document.js'

const root = fileURLToPath(new URL('../../', import.meta.url))

t.test('redocly lint, recommended rules (redocly.yaml): 0 errors, 0 warnings', async (t) => {
  // No telemetry and no update check: the test talks to nobody.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' }
  const { stdout } = await promisify(execFile)(join(root, 'node_modules/.bin/redocly'),
    ['lint', DOCUMENT_PATH, '--config', join(root, 'redocly.yaml'), '--format', 'json'], { cwd: root, env, timeout: 120_000 })
  const report = JSON.parse(stdout)
  t.strictSame(report.totals, { errors: 0, warnings: 0, ignored: 0 })
  t.strictSame(report.problems, [])
})

// The conformance check that test/helper.ts puts on every inject must be able to fail.
t.test('the conformance check refuses what the document does not allow', async (t) => {
  const ok = { method: 'GET', url: '/users/me', statusCode: 200, headers: { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'abc' }, body: JSON.stringify({ id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER' }) }
  t.equal(conformanceProblem(ok), undefined)
  t.equal(conformanceProblem({ ...ok, url: '/users/me?x=1' }), undefined, 'the query string is not part of the path')
  t.equal(conformanceProblem({ ...ok, url: '/nowhere', statusCode: 404 }), undefined, 'paths the document does not list are not checked')
  t.equal(conformanceProblem({ ...ok, statusCode: 429 }), 'GET /users/me answered 429, a status the document does not declare (it has 200, 400, 401, 403, 408, 413, 415, 500, 503)')
  t.equal(conformanceProblem({ ...ok, headers: { 'content-type': 'application/json' } }), 'GET /users/me answered 200 without its declared header X-Request-Id')
  t.match(conformanceProblem({ ...ok, body: JSON.stringify({ id: 2, username: 'user', email: 'user@example.com', role: 'ROLE_USER', passwordHash: 'x' }) }),
    /^GET \/users\/me answered 200 with a body the document does not allow: data must NOT have additional properties/)
  t.match(conformanceProblem({ ...ok, statusCode: 401, headers: { ...ok.headers, 'www-authenticate': 'Basic' }, body: JSON.stringify({ statusCode: 401, error: 'Unauthorized', message: 'Token ausente' }) }),
    /^GET \/users\/me answered 401 with header WWW-Authenticate: "Basic" data must be equal to one of the allowed values/)
  t.match(conformanceProblem({ ...ok, statusCode: 503, headers: { ...ok.headers, 'retry-after': '1' }, body: JSON.stringify({ statusCode: 503, error: 'Service Unavailable' }) }),
    /^GET \/users\/me answered 503 with a body the document does not allow: data must have required property 'message'/)
  t.match(conformanceProblem({ ...ok, statusCode: 400, body: JSON.stringify({ email: 'El email debe ser valido', role: 'x' }) }),
    /^GET \/users\/me answered 400 with a body the document does not allow/, 'a field map has only the body\'s fields')
})
