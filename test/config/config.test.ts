import { availableParallelism } from 'node:os'
import t from 'tap'
import { DEV_JWT_SECRET, loadConfig } from '../../src/config/index.js'
import { digestKeyFrom } from '../../src/config/signing-keys.js'
import { checkArgon2Cost } from '../../src/config/argon2.js'

const strongSecret = 'k3Jd9sQ2mX7vB1nZ8pL4wR6tY0uE5aC2fH9gK1jM3qS7xV0b'
const production = { APP_PROFILE: 'production', DATABASE_URL: 'postgres://db.internal:5432/users', JWT_SECRET: strongSecret }

t.test('development defaults follow CONTRACT §1', async (t) => {
  const config = loadConfig({})
  t.strictSame(config, {
    profile: 'development',
    port: 8080,
    host: '127.0.0.1',
    databaseUrl: undefined,
    databaseMigrationUrl: undefined,
    migrations: 'on-start',
    jwt: { algorithm: 'HS256', secret: DEV_JWT_SECRET, previousSecret: undefined, keys: undefined, digestKey: digestKeyFrom(DEV_JWT_SECRET), expirationMs: 86_400_000, issuer: 'user-management', audience: 'user-management' },
    logLevel: 'info',
    management: { port: 9090, host: '127.0.0.1' },
    trustProxy: false,
    argon2: { memoryCost: 19456, timeCost: 2, parallelism: 1 },
    hashConcurrency: Math.min(availableParallelism(), 3),
    threadPoolSize: 4,
    dbPoolMax: 10,
    redisUrl: undefined,
    rateLimits: true,
    corsOrigins: [],
    publicUrl: undefined,
    shutdownDrainMs: 0,
    tracing: undefined,
    seed: { admin: { email: 'admin@example.com', password: 'Admin1234' }, user: { email: 'user@example.com', password: 'User12345' } }
  })
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.jwt), 'the configuration is frozen')
})

t.test('HASH_CONCURRENCY defaults to the cores, below the thread pool argon2 runs on (CONTRACT §3)', async (t) => {
  const cores = availableParallelism()
  for (const [pool, expected] of [['1', 1], ['2', 1], [String(cores), Math.max(1, cores - 1)], [String(cores + 1), cores], ['1024', cores]] as const) {
    const config = loadConfig({ UV_THREADPOOL_SIZE: pool })
    t.strictSame([config.threadPoolSize, config.hashConcurrency], [Number(pool), expected], `UV_THREADPOOL_SIZE=${pool}, ${cores} cores`)
  }
  t.strictSame(loadConfig({ UV_THREADPOOL_SIZE: '2', HASH_CONCURRENCY: '6' }).hashConcurrency, 6, 'as set: the start-up warning says what to change')
  t.throws(() => loadConfig({ UV_THREADPOOL_SIZE: '0' }), { name: 'ConfigError', message: 'Invalid configuration: UV_THREADPOOL_SIZE must be an integer from 1 to 1024 (got "0")' })
})

t.test('tracing: on with an OTLP endpoint and nothing else, off again when the SDK or its exporter is disabled', async (t) => {
  const batch = { maxQueueSize: 2048, maxExportBatchSize: 512, scheduledDelayMillis: 5000, exportTimeoutMillis: 30_000 }
  const protocol = 'http/protobuf'
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing, { protocol, batch })
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example.com/v1/traces', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }).tracing, { protocol: 'http/json', batch })
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).tracing, { protocol, batch }, 'the traces\' own protocol first')
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_SCHEDULE_DELAY: '50' }).tracing,
    { protocol, batch: { ...batch, maxQueueSize: 100, maxExportBatchSize: 100, scheduledDelayMillis: 50 } }, 'a batch never larger than the queue')
  t.equal(loadConfig({ OTEL_SERVICE_NAME: 'accounts', OTEL_TRACES_SAMPLER: 'always_on' }).tracing, undefined, 'no endpoint: off')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing, undefined)
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }).tracing, undefined, 'any case, as the SDK reads it')
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'False' }).tracing, { protocol, batch })
  t.strictSame(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=a%20b, Authorization=Bearer%20t,', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=production,team=accounts%2Cauth,empty=' }).tracing, { protocol, batch }, 'well-formed lists, an empty attribute value included')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing, undefined)
})

t.test('production defaults: all interfaces, a drain delay', async (t) => {
  const config = loadConfig(production)
  t.equal(config.host, '0.0.0.0')
  t.equal(config.management.host, '0.0.0.0')
  t.equal(config.shutdownDrainMs, 5000)
  t.equal(config.jwt.secret, strongSecret)
})

t.test('values are parsed into their types', async (t) => {
  const config = loadConfig({
    PORT: '3000', MANAGEMENT_PORT: 'off', TRUST_PROXY: '10.0.0.0/8, 192.168.1.1', JWT_EXPIRATION: '60000',
    RATE_LIMITS: 'off', CORS_ORIGINS: 'https://a.example.com,https://b.example.com', HASH_CONCURRENCY: '3', EMPTY: ''
  })
  t.equal(config.port, 3000)
  t.equal(config.management.port, null)
  t.strictSame(config.trustProxy, ['10.0.0.0/8', '192.168.1.1'])
  t.equal(config.jwt.expirationMs, 60000)
  t.equal(config.rateLimits, false)
  t.strictSame(config.corsOrigins, ['https://a.example.com', 'https://b.example.com'])
  t.equal(config.hashConcurrency, 3)
  t.strictSame(loadConfig({ TRUST_PROXY: 'loopback, linklocal,uniquelocal' }).trustProxy, ['loopback', 'linklocal', 'uniquelocal'], 'proxy-addr\'s names')
  t.equal(loadConfig({ PORT: '' }).port, 8080, 'an empty variable counts as unset')
  t.equal(loadConfig({ PORT: '9000', MANAGEMENT_PORT: '9000', HOST: '127.0.0.1', MANAGEMENT_HOST: '127.0.0.2' }).management.port, 9000, 'one port on two addresses')
  for (const url of ['redis://cache:6379', 'redis://cache:6379/', 'rediss://u:p@cache:6380/3']) t.equal(loadConfig({ REDIS_URL: url }).redisUrl, url, url)
})

const invalid: Array<[string, Record<string, string>, string]> = [
  ['PORT', { PORT: '0' }, 'Invalid configuration: PORT must be an integer from 1 to 65535 (got "0")'],
  ['PORT', { PORT: '65536' }, 'Invalid configuration: PORT must be an integer from 1 to 65535 (got "65536")'],
  ['PORT', { PORT: 'abc' }, 'Invalid configuration: PORT must be an integer from 1 to 65535 (got "abc")'],
  ['JWT_EXPIRATION', { JWT_EXPIRATION: '-1' }, 'Invalid configuration: JWT_EXPIRATION must be a positive integer (milliseconds) (got "-1")'],
  ['JWT_EXPIRATION', { JWT_EXPIRATION: '0' }, 'Invalid configuration: JWT_EXPIRATION must be a positive integer (milliseconds) (got "0")'],
  ['APP_PROFILE', { APP_PROFILE: 'staging' }, 'Invalid configuration: APP_PROFILE must be "development" or "production" (got "staging")'],
  ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }, 'Invalid configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "verbose")'],
  ['MANAGEMENT_PORT', { MANAGEMENT_PORT: 'on' }, 'Invalid configuration: MANAGEMENT_PORT must be an integer from 1 to 65535, or "off" (got "on")'],
  ['TRUST_PROXY', { TRUST_PROXY: 'yes please' }, 'Invalid configuration: TRUST_PROXY must be false, true or a comma-separated list of the balancers\' addresses/CIDRs (or loopback, linklocal, uniquelocal) (got "yes please")'],
  ['TRUST_PROXY', { TRUST_PROXY: 'yes' }, 'Invalid configuration: TRUST_PROXY has an invalid entry: use addresses, CIDRs from /1 up, or loopback, linklocal, uniquelocal (got "yes")'],
  ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.0/40' }, 'Invalid configuration: TRUST_PROXY has an invalid entry: use addresses, CIDRs from /1 up, or loopback, linklocal, uniquelocal (got "10.0.0.0/40")'],
  // proxy-addr refuses a /0 in Fastify's constructor, which used to print an off-contract "Startup failed" line.
  ['TRUST_PROXY', { TRUST_PROXY: '0.0.0.0/0' }, 'Invalid configuration: TRUST_PROXY has an invalid entry: use addresses, CIDRs from /1 up, or loopback, linklocal, uniquelocal (got "0.0.0.0/0")'],
  ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.1,::/0' }, 'Invalid configuration: TRUST_PROXY has an invalid entry: use addresses, CIDRs from /1 up, or loopback, linklocal, uniquelocal (got "::/0")'],
  ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }, 'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://db/users?sslmode=strict' }, 'Invalid configuration: DATABASE_URL sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://db/users?connect_timeout=5' }, 'Invalid configuration: DATABASE_URL parameter "connect_timeout" is not supported (supported: sslmode, sslrootcert, sslcert, sslkey, target_session_attrs, application_name)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://a,b/users?target_session_attrs=standby' }, 'Invalid configuration: DATABASE_URL target_session_attrs must be one of any, read-write, primary (a service that writes needs the primary)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://db:99999/users' }, 'Invalid configuration: DATABASE_URL the host is not host[:port] with a port from 1 to 65535'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://db/users?sslcert=/c.crt' }, 'Invalid configuration: DATABASE_URL sslcert and sslkey go together (a client certificate and its key)'],
  ['DATABASE_MIGRATION_URL', { DATABASE_MIGRATION_URL: 'postgres://db/users?sslmode=on' }, 'Invalid configuration: DATABASE_MIGRATION_URL sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full'],
  // A malformed percent-encoding is named, not a URIError's stack; a password is never echoed.
  ['DATABASE_URL', { DATABASE_URL: 'postgres://bob:S3cret%ZZ@db/users' }, 'Invalid configuration: DATABASE_URL has a malformed percent-encoding in its user or password'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://bob@db/us%zzers' }, 'Invalid configuration: DATABASE_URL has a malformed percent-encoding in its database name'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://bob@[f%zz]/users' }, 'Invalid configuration: DATABASE_URL has a malformed percent-encoding in the host'],
  ['DATABASE_MIGRATION_URL', { DATABASE_MIGRATION_URL: 'postgres://u:%zz@db/users' }, 'Invalid configuration: DATABASE_MIGRATION_URL has a malformed percent-encoding in its user or password'],
  ['DATABASE_URL', { DATABASE_URL: 'mysql://bob:S3cretPass@db/users' }, 'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  // Nothing of a password quoted back, however the URL is broken.
  ['DATABASE_URL', { DATABASE_URL: 'app:S3cretPass@127.0.0.1:5432/users' }, 'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres//app:S3cretPass@127.0.0.1/users' }, 'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://app:S3cret/Pass@127.0.0.1:5432/users' }, 'Invalid configuration: DATABASE_URL has an @ where only host:port, the database or parameters may be: percent-encode the password\'s /, @, ?, # and : (%2F, %40, %3F, %23, %3A)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://app:S3c?ret@127.0.0.1:5432/users' }, 'Invalid configuration: DATABASE_URL has an @ where only host:port, the database or parameters may be: percent-encode the password\'s /, @, ?, # and : (%2F, %40, %3F, %23, %3A)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://app:S3cret@Pass@127.0.0.1:5432/users' }, 'Invalid configuration: DATABASE_URL has an @ where only host:port, the database or parameters may be: percent-encode the password\'s /, @, ?, # and : (%2F, %40, %3F, %23, %3A)'],
  ['REDIS_URL', { REDIS_URL: 'u:S3cretPass@127.0.0.1:6379' }, 'Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (the value is not quoted: it may hold a secret)'],
  // Quoted, these said the password: libpq's key=value form, an @ typed as :, a space in it, a key in the query.
  ['DATABASE_URL', { DATABASE_URL: 'host=db1.internal port=5432 dbname=users user=app password=S3cretPw sslmode=verify-full' }, 'Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://app:S3cretPw:db1.internal/users' }, 'Invalid configuration: DATABASE_URL the host is not host[:port] with a port from 1 to 65535'],
  ['DATABASE_URL', { DATABASE_URL: 'postgres://db0,app:S3cretPw/users' }, 'Invalid configuration: DATABASE_URL host 2 of 2 is not host[:port] with a port from 1 to 65535'],
  ['DATABASE_MIGRATION_URL', { DATABASE_MIGRATION_URL: 'postgres://app:S3cret Pw/users' }, 'Invalid configuration: DATABASE_MIGRATION_URL must be a postgres:// or postgresql:// URL (the value is not quoted: it may hold a secret)'],
  ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'otlp.vendor.example/v1/traces?api-key=sk_live_S3cret' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL such as http://collector:4318/v1/traces (the value is not quoted: it may hold a secret)'],
  // A long value is cut, and says so.
  ['CORS_ORIGINS', { CORS_ORIGINS: 'x'.repeat(70) }, `Invalid configuration: CORS_ORIGINS must be a comma-separated list of origins such as https://app.example.com (got "${'x'.repeat(60)}"…)`],
  // ioredis sent SELECT NaN, whose refusal ended the start with a stack trace; parameters are its options.
  ['REDIS_URL', { REDIS_URL: 'redis://127.0.0.1:6379/abc' }, 'Invalid configuration: REDIS_URL must end in its host:port, or a database number such as /2'],
  ['REDIS_URL', { REDIS_URL: 'redis://127.0.0.1:6379/1/2' }, 'Invalid configuration: REDIS_URL must end in its host:port, or a database number such as /2'],
  ['REDIS_URL', { REDIS_URL: 'redis://127.0.0.1:6379?db=abc' }, 'Invalid configuration: REDIS_URL takes no ?parameters or #fragment: ioredis would read them as its own options'],
  ['REDIS_URL', { REDIS_URL: 'redis://127.0.0.1:6379/0?commandTimeout=60000' }, 'Invalid configuration: REDIS_URL takes no ?parameters or #fragment: ioredis would read them as its own options'],
  ['REDIS_URL', { REDIS_URL: 'redis://:%zz@127.0.0.1:6379' }, 'Invalid configuration: REDIS_URL has a malformed percent-encoding in its user or password'],
  ['REDIS_URL', { REDIS_URL: 'redis://a b' }, 'Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (the value is not quoted: it may hold a secret)'],
  ['REDIS_URL', { REDIS_URL: 'redis://[::1' }, 'Invalid configuration: REDIS_URL is not a URL that can be parsed'],
  ['REDIS_URL', { REDIS_URL: 'http://:S3cretPass@cache:6379' }, 'Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (the value is not quoted: it may hold a secret)'],
  // The API listened, then the management listener's EADDRINUSE named an address, not a variable.
  ['MANAGEMENT_PORT', { PORT: '9000', MANAGEMENT_PORT: '9000' }, 'Invalid configuration: MANAGEMENT_PORT must differ from PORT (both 9000) where the two listen on the same address'],
  ['MANAGEMENT_PORT', { PORT: '9000', MANAGEMENT_PORT: '9000', HOST: '0.0.0.0', MANAGEMENT_HOST: '127.0.0.1' }, 'Invalid configuration: MANAGEMENT_PORT must differ from PORT (both 9000) where the two listen on the same address'],
  ['JWT_SECRET_PREVIOUS', { JWT_SECRET: 'k'.repeat(16) + 'x'.repeat(24), JWT_SECRET_PREVIOUS: 'k'.repeat(16) + 'x'.repeat(24) }, 'Invalid configuration: JWT_SECRET_PREVIOUS is the same secret as JWT_SECRET; give the former secret, or unset it'],
  ['MIGRATIONS', { MIGRATIONS: 'later' }, 'Invalid configuration: MIGRATIONS must be "on-start" or "off" (got "later")'],
  ['RATE_LIMITS', { RATE_LIMITS: 'yes' }, 'Invalid configuration: RATE_LIMITS must be "on" or "off" (got "yes")'],
  ['DB_POOL_MAX', { DB_POOL_MAX: '0' }, 'Invalid configuration: DB_POOL_MAX must be an integer from 1 to 500 (got "0")'],
  ['HASH_CONCURRENCY', { HASH_CONCURRENCY: '1.5' }, 'Invalid configuration: HASH_CONCURRENCY must be an integer from 1 to 128 (got "1.5")'],
  ['REDIS_URL', { REDIS_URL: 'localhost:6379' }, 'Invalid configuration: REDIS_URL must be a redis:// or rediss:// URL (the value is not quoted: it may hold a secret)'],
  ['CORS_ORIGINS', { CORS_ORIGINS: '*' }, 'Invalid configuration: CORS_ORIGINS must be a comma-separated list of origins such as https://app.example.com (got "*")'],
  ['SHUTDOWN_DRAIN_MS', { SHUTDOWN_DRAIN_MS: '-5' }, 'Invalid configuration: SHUTDOWN_DRAIN_MS must be a non-negative integer (milliseconds) (got "-5")'],
  ['ARGON2_MEMORY_KIB', { ARGON2_MEMORY_KIB: 'lots' }, 'Invalid configuration: ARGON2_MEMORY_KIB must be an integer from 1 to 4294967295 (KiB) (got "lots")'],
  // Beyond what argon2 runs: it said so only when a sign-up or an unknown e-mail's login hashed (500).
  ['ARGON2_MEMORY_KIB', { ARGON2_MEMORY_KIB: '5000000000' }, 'Invalid configuration: ARGON2_MEMORY_KIB must be an integer from 1 to 4294967295 (KiB) (got "5000000000")'],
  ['ARGON2_ITERATIONS', { ARGON2_ITERATIONS: '5000000000' }, 'Invalid configuration: ARGON2_ITERATIONS must be an integer from 1 to 4294967295 (got "5000000000")'],
  ['ARGON2_MEMORY_KIB', { ARGON2_MEMORY_KIB: '12', ARGON2_PARALLELISM: '2' }, 'Invalid configuration: ARGON2_MEMORY_KIB must be at least 16 with ARGON2_PARALLELISM 2 (argon2 needs 8 KiB a lane)'],
  ['OTEL_EXPORTER_OTLP_ENDPOINT', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL such as http://collector:4318 (the value is not quoted: it may hold a secret)'],
  ['OTEL_EXPORTER_OTLP_PROTOCOL', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf" or "http/json" (OTLP over HTTP; gRPC is not shipped) (got "grpc")'],
  ['OTEL_TRACES_SAMPLER', { OTEL_TRACES_SAMPLER: 'sometimes' }, 'Invalid configuration: OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio (got "sometimes")'],
  ['OTEL_TRACES_SAMPLER_ARG', { OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'Invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a sampling ratio from 0 to 1, such as 0.25 (got "1.5")'],
  ['OTEL_SDK_DISABLED', { OTEL_SDK_DISABLED: 'yes' }, 'Invalid configuration: OTEL_SDK_DISABLED must be "true" or "false" (got "yes")'],
  // The SDK would drop these entries without a word; the value, which may hold a key, is not quoted back.
  ['OTEL_EXPORTER_OTLP_HEADERS', { OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=s3cret%0Ab' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS must be a comma-separated list of name=value pairs, each name a header name and each value percent-encoded (a ; as %3B) without control characters (entry 1 is not)'],
  ['OTEL_EXPORTER_OTLP_HEADERS', { OTEL_EXPORTER_OTLP_HEADERS: 'a=1,bad name=s3cret' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS must be a comma-separated list of name=value pairs, each name a header name and each value percent-encoded (a ; as %3B) without control characters (entry 2 is not)'],
  ['OTEL_EXPORTER_OTLP_TRACES_HEADERS', { OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'garbage' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_TRACES_HEADERS must be a comma-separated list of name=value pairs, each name a header name and each value percent-encoded (a ; as %3B) without control characters (entry 1 is not)'],
  ['OTEL_RESOURCE_ATTRIBUTES', { OTEL_RESOURCE_ATTRIBUTES: 'nonsense,x' }, 'Invalid configuration: OTEL_RESOURCE_ATTRIBUTES must be a comma-separated list of key=value pairs, each percent-encoded (an = as %3D) and at most 255 characters decoded (entry 1 is not)'],
  ['OTEL_EXPORTER_OTLP_HEADERS', { OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Basic abc;def' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS must be a comma-separated list of name=value pairs, each name a header name and each value percent-encoded (a ; as %3B) without control characters (entry 1 is not)'],
  ['OTEL_RESOURCE_ATTRIBUTES', { OTEL_RESOURCE_ATTRIBUTES: 'team=a=b,deployment.environment=prod' }, 'Invalid configuration: OTEL_RESOURCE_ATTRIBUTES must be a comma-separated list of key=value pairs, each percent-encoded (an = as %3D) and at most 255 characters decoded (entry 1 is not)'],
  ['OTEL_RESOURCE_ATTRIBUTES', { OTEL_RESOURCE_ATTRIBUTES: 'team=a%zz' }, 'Invalid configuration: OTEL_RESOURCE_ATTRIBUTES must be a comma-separated list of key=value pairs, each percent-encoded (an = as %3D) and at most 255 characters decoded (entry 1 is not)'],
  ['OTEL_EXPORTER_OTLP_TIMEOUT', { OTEL_EXPORTER_OTLP_TIMEOUT: 'abc' }, 'Invalid configuration: OTEL_EXPORTER_OTLP_TIMEOUT must be an integer from 1 to 3600000 (milliseconds) (got "abc")'],
  ['JWT_ISSUER', { JWT_ISSUER: '   ' }, 'Invalid configuration: JWT_ISSUER must be a string with something other than spaces, up to 255 characters (got "   ")']
]
for (const [variable, env, message] of invalid) {
  t.test(`a malformed ${variable} (${JSON.stringify(env)}) is refused in one line`, async (t) => {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message })
  })
}

t.test('an argon2 memory cost this machine cannot give HASH_CONCURRENCY hashes at once is refused at start', async (t) => {
  // 4 TiB, argon2's own maximum: more than any machine here has.
  t.throws(() => loadConfig({ ...production, ARGON2_MEMORY_KIB: '4294967295', HASH_CONCURRENCY: '2' }), {
    name: 'ConfigError',
    message: /^Invalid configuration: ARGON2_MEMORY_KIB must be at most \d+ here: 2 hashes at once \(HASH_CONCURRENCY\) must fit in this process's [0-9.]+ GiB of memory$/
  })
  const eightGiB = 8 * 2 ** 30
  t.throws(() => checkArgon2Cost({ memoryCost: 2 * 2 ** 20 + 1, timeCost: 2, parallelism: 1 }, 4, true, eightGiB), {
    name: 'ConfigError',
    message: 'Invalid configuration: ARGON2_MEMORY_KIB must be at most 2097152 here: 4 hashes at once (HASH_CONCURRENCY) must fit in this process\'s 8.0 GiB of memory'
  })
  t.doesNotThrow(() => checkArgon2Cost({ memoryCost: 2 * 2 ** 20, timeCost: 2, parallelism: 1 }, 4, true, eightGiB), 'up to it')
})

const tooWide = 'must not hold a prefix shorter than /8 (IPv4) or /7 (IPv6) in production: it would believe almost any client\'s X-Forwarded-For; list the balancers\' addresses'
const refusedInProduction: Array<[string, Record<string, string | undefined>, string]> = [
  ['DATABASE_URL', { DATABASE_URL: undefined }, 'Invalid configuration: DATABASE_URL is required in production'],
  ['JWT_SECRET', { JWT_SECRET: undefined }, 'Invalid configuration: JWT_SECRET is required in production'],
  ['JWT_SECRET', { JWT_SECRET: 'short-secret' }, 'Invalid configuration: JWT_SECRET must be at least 32 bytes long in production'],
  ['JWT_SECRET', { JWT_SECRET: 'a'.repeat(64) }, 'Invalid configuration: JWT_SECRET must not be one repeated character'],
  ['JWT_SECRET', { JWT_SECRET: '<SIGNING_SECRET>' }, 'Invalid configuration: JWT_SECRET is the placeholder or development secret; use a strong random value'],
  ['JWT_SECRET', { JWT_SECRET: DEV_JWT_SECRET }, 'Invalid configuration: JWT_SECRET is the placeholder or development secret; use a strong random value'],
  ['JWT_SECRET_PREVIOUS', { JWT_SECRET_PREVIOUS: 'weak' }, 'Invalid configuration: JWT_SECRET_PREVIOUS must be at least 32 bytes long in production'],
  ['TRUST_PROXY', { TRUST_PROXY: 'true' }, 'Invalid configuration: TRUST_PROXY must not be "true" in production: it would believe any client\'s X-Forwarded-For; list the balancers\' addresses'],
  ['TRUST_PROXY', { TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1' }, `Invalid configuration: TRUST_PROXY ${tooWide} (got "0.0.0.0/1")`],
  ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.5,64.0.0.0/7' }, `Invalid configuration: TRUST_PROXY ${tooWide} (got "64.0.0.0/7")`],
  ['TRUST_PROXY', { TRUST_PROXY: '2000::/3' }, `Invalid configuration: TRUST_PROXY ${tooWide} (got "2000::/3")`],
  // An IPv4-mapped prefix spans IPv4 clients: ::ffff:0:0/96 is every one of them.
  ['TRUST_PROXY', { TRUST_PROXY: '::ffff:0:0/96' }, `Invalid configuration: TRUST_PROXY ${tooWide} (got "::ffff:0:0/96")`],
  ['TRUST_PROXY', { TRUST_PROXY: '0:0:0:0:0:ffff:8000:0/97' }, `Invalid configuration: TRUST_PROXY ${tooWide} (got "0:0:0:0:0:ffff:8000:0/97")`],
  ['DEV_ADMIN_EMAIL', { DEV_ADMIN_EMAIL: 'root@example.com' }, 'Invalid configuration: DEV_ADMIN_EMAIL must not be set in production (DEV_* variables are for development only)'],
  ['DEV_USER_PASSWORD', { DEV_USER_PASSWORD: 'x' }, 'Invalid configuration: DEV_USER_PASSWORD must not be set in production (DEV_* variables are for development only)'],
  ['DEV_SEED_EXTRA', { DEV_SEED_EXTRA: '1' }, 'Invalid configuration: DEV_SEED_EXTRA must not be set in production (DEV_* variables are for development only)'],
  ['ARGON2_MEMORY_KIB', { ARGON2_MEMORY_KIB: '1024' }, 'Invalid configuration: ARGON2_MEMORY_KIB must be at least 19456 in production (OWASP minimum for argon2id)'],
  ['ARGON2_ITERATIONS', { ARGON2_ITERATIONS: '1' }, 'Invalid configuration: ARGON2_ITERATIONS must be at least 2 in production (OWASP minimum for argon2id)']
]
for (const [variable, overrides, message] of refusedInProduction) {
  t.test(`production refuses ${variable} ${JSON.stringify(overrides)}`, async (t) => {
    t.throws(() => loadConfig({ ...production, ...overrides }), { name: 'ConfigError', message })
  })
}

// Fastify 5.12.1+ ignores a numeric trustProxy (GHSA-3m5p-2c4r-xxw2): a hop count would put every client on the balancer's counters.
for (const [env, profile] of [[{}, 'development'], [production, 'production']] as const) {
  t.test(`a hop count is refused in ${profile}, with what to write instead`, async (t) => {
    for (const hops of ['1', '2']) {
      t.throws(() => loadConfig({ ...env, TRUST_PROXY: hops }), {
        name: 'ConfigError',
        message: `Invalid configuration: TRUST_PROXY must not be a hop count, which Fastify ignores (GHSA-3m5p-2c4r-xxw2): list the balancers' addresses or CIDRs instead, e.g. 10.0.0.5,10.0.0.6 (got "${hops}")`
      })
    }
  })
}

t.test('production accepts the balancers\' addresses, /8 and /7 prefixes and proxy-addr\'s names', async (t) => {
  const accepted = ['10.0.0.5,10.0.0.6', '10.0.0.0/8', 'fc00::/7', '::ffff:10.0.0.0/104', 'loopback,linklocal,uniquelocal', '2001:db8::1']
  for (const value of accepted) t.strictSame(loadConfig({ ...production, TRUST_PROXY: value }).trustProxy, value.split(','), value)
})

t.test('development accepts what production refuses (cheap argon2, seed overrides)', async (t) => {
  const config = loadConfig({ ARGON2_MEMORY_KIB: '64', ARGON2_ITERATIONS: '1', DEV_ADMIN_EMAIL: 'root@example.com', TRUST_PROXY: 'true' })
  t.strictSame(loadConfig({ TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1' }).trustProxy, ['0.0.0.0/1', '128.0.0.0/1'], 'wide prefixes, like true, are for development only')
  t.equal(config.argon2.memoryCost, 64)
  t.equal(config.seed.admin.email, 'root@example.com')
  t.equal(config.trustProxy, true)
})

// A Node deployment usually says "production" with NODE_ENV. Left without APP_PROFILE, that would
// start the development profile: in-process PGlite, DATABASE_URL ignored, and the README's admin
// with its published password, in a process its operator believes to be production.
t.test('NODE_ENV=production without APP_PROFILE stops the start instead of running the development profile', async (t) => {
  const message = 'Invalid configuration: APP_PROFILE must be set when NODE_ENV=production: unset, it means development (in-process PGlite, DATABASE_URL ignored, the seed accounts and their published passwords); set APP_PROFILE=production'
  t.throws(() => loadConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://app@db/users', JWT_SECRET: 'x'.repeat(16) + 'y'.repeat(16) }), { name: 'ConfigError', message })
  t.throws(() => loadConfig({ NODE_ENV: 'production' }), { name: 'ConfigError', message })
  t.equal(loadConfig({ ...production, NODE_ENV: 'production' }).profile, 'production')
  t.equal(loadConfig({ APP_PROFILE: 'development', NODE_ENV: 'production' }).profile, 'development', 'said outright, development is taken')
  t.equal(loadConfig({ NODE_ENV: 'development' }).profile, 'development')
})
