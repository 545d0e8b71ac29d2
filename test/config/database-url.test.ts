import t from 'tap'
import { parseDatabaseUrl } from '../../src/config/database-url.js'

t.test('libpq\'s URL: several hosts, defaults of sslmode and target_session_attrs, encoded parts', async (t) => {
  t.strictSame(parseDatabaseUrl('postgres://app:p%40ss@db1:5433,db2,[::1]:6000/users?application_name=ums'), {
    hosts: [{ host: 'db1', port: 5433 }, { host: 'db2', port: 5432 }, { host: '::1', port: 6000 }],
    database: 'users',
    user: 'app',
    password: 'p@ss',
    sslMode: 'prefer',
    sslRootCert: undefined,
    sslCert: undefined,
    sslKey: undefined,
    targetSessionAttrs: 'read-write',
    applicationName: 'ums'
  })
  // libpq ends the user at the first colon: the password is everything after it.
  t.strictSame([parseDatabaseUrl('postgres://app:pa:ss:@db/users')].map(({ user, password }) => ({ user, password })), [{ user: 'app', password: 'pa:ss:' }])
  const single = parseDatabaseUrl('postgresql://db/users')
  t.strictSame([single.hosts, single.targetSessionAttrs, single.sslMode, single.user], [[{ host: 'db', port: 5432 }], 'any', 'prefer', ''], 'one host: any server; libpq\'s prefer')
})

t.test('sslmode with libpq\'s meanings: a root certificate makes require verify the chain; system means verify-full', async (t) => {
  t.equal(parseDatabaseUrl('postgres://db/u?sslmode=require').sslMode, 'require')
  t.equal(parseDatabaseUrl('postgres://db/u?sslmode=require&sslrootcert=/ca.crt').sslMode, 'verify-ca')
  t.equal(parseDatabaseUrl('postgres://db/u?sslrootcert=system').sslMode, 'verify-full')
  t.equal(parseDatabaseUrl('postgres://db/u?sslmode=verify-full&sslrootcert=system').sslMode, 'verify-full')
  // libpq 16 refuses a weaker mode named beside the public CAs, rather than upgrading it unasked.
  for (const mode of ['disable', 'prefer', 'require', 'verify-ca']) {
    t.throws(() => parseDatabaseUrl(`postgres://db/u?sslmode=${mode}&sslrootcert=system`), { message: `sslmode=${mode} may not be used with sslrootcert=system: use verify-full, or leave sslmode out` }, mode)
  }
  t.strictSame(parseDatabaseUrl('postgres://db/u?sslmode=verify-full&sslrootcert=/ca.crt&sslcert=/c.crt&sslkey=/c.key'),
    { ...parseDatabaseUrl('postgres://db/u'), sslMode: 'verify-full', sslRootCert: '/ca.crt', sslCert: '/c.crt', sslKey: '/c.key' })
  t.throws(() => parseDatabaseUrl('postgres:///u?host=/run/postgresql'), { message: 'parameter "host" is not supported (supported: sslmode, sslrootcert, sslcert, sslkey, target_session_attrs, application_name)' })
})
