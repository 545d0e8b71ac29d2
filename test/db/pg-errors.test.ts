import t from 'tap'
import { NotReadyError, StatementCancelledError, databaseUnavailable, uniqueViolation } from '../../src/db/pg-errors.js'
import { describeError } from '../../src/telemetry/error-description.js'

const wrapped = (cause: object) => Object.assign(new Error('Failed query: …'), { cause })

t.test('a lost connection is the database\'s fault, whatever wraps it; a SQLSTATE decides first', async (t) => {
  // A role that may no longer log in, a database gone, a certificate that no longer verifies: the
  // database is out of reach for every request alike (503), not one request's bug (500).
  for (const code of ['EPIPE', 'ECONNRESET', 'ECONNREFUSED', 'CONNECTION_CLOSED', 'UMS_DB_ACQUIRE_TIMEOUT', 'ENETUNREACH', 'EAI_AGAIN',
    'ERR_TLS_CERT_ALTNAME_INVALID', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'UMS_DB_TLS_REFUSED', 'UMS_DB_NO_ANSWER']) {
    t.equal(databaseUnavailable(wrapped(Object.assign(new Error('x'), { code }))), true, code)
  }
  // 42P01, 42703: a schema behind the code, until `migrate` runs (test/db/migrations-off.test.ts).
  for (const code of ['08006', '57P01', '57014', '53300', '42P01', '42703', '28000', '28P01', '3D000']) t.equal(databaseUnavailable(wrapped({ code })), true, code)
  for (const code of ['23505', '22P02', '42601', '42883']) t.equal(databaseUnavailable(wrapped({ code })), false, code)
  t.equal(databaseUnavailable(new Error('a bug')), false)
  // Whatever its code, a server that ends the session (FATAL) refused this instance, not a request:
  // a database closed to connections (55000), CONNECT revoked (42501).
  for (const code of ['55000', '42501']) {
    t.equal(databaseUnavailable(wrapped({ code, severity: 'FATAL' })), true, `${code} FATAL`)
    t.equal(databaseUnavailable(wrapped({ code, severity: 'ERROR' })), false, `${code} ERROR: a request's own`)
  }
  // A server that hung up or stayed silent before the connection was ready, as the connector raises it.
  for (const hungUp of [true, false]) t.equal(databaseUnavailable(wrapped(new NotReadyError('db:5432', hungUp))), true, `NotReadyError, hung up: ${hungUp}`)
  // Cancelled past statement_timeout, whatever the server then answered (kept as the cause).
  for (const code of ['40P01', '22P02', '57014']) {
    t.equal(databaseUnavailable(new StatementCancelledError(5000, { severity: 'ERROR', code })), true, `cancelled, answered ${code}`)
    t.equal(databaseUnavailable(wrapped(new StatementCancelledError(5000, { severity: 'ERROR', code }))), true, `cancelled, answered ${code}, as Drizzle wraps it`)
  }
})

t.test('a unique violation names its constraint, on either driver\'s field', async (t) => {
  t.equal(uniqueViolation(wrapped({ code: '23505', constraint_name: 'users_email_unique' })), 'users_email_unique')
  t.equal(uniqueViolation(wrapped({ code: '23505', constraint: 'users_username_key_unique' })), 'users_username_key_unique')
  t.equal(uniqueViolation(wrapped({ code: '23514' })), undefined)
  t.equal(uniqueViolation(wrapped(Object.assign(new Error('x'), { code: 'EPIPE' }))), undefined)
})

t.test('an error is classified as deep as the log describes it', async (t) => {
  const deep = (code: string) => wrapped(wrapped(wrapped(wrapped(Object.assign(new Error('terminating connection'), { code })))))
  t.equal(databaseUnavailable(deep('57P01')), true, 'the fifth link\'s SQLSTATE')
  t.match(describeError(deep('57P01')), { cause: { cause: { cause: { cause: { code: '57P01' } } } } }, 'the log shows that link too')
})
