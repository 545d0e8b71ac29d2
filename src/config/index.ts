import { availableParallelism } from 'node:os'
import { Value } from '@sinclair/typebox/value'
import { ConfigError } from './config-error.js'
import { checkedDatabaseUrl, checkedRedisUrl, quotedValue } from './urls.js'
import { checkProductionTrustProxy, parseTrustProxy } from './trust-proxy.js'
import { EnvSchema, integerRule, takesInteger, type Env } from './env.js'
import { checkSecret, tokenKeys, type TokenKeys } from './jwt.js'
import { tracingConfig, type TracingConfig } from './tracing.js'
import { ARGON2_MINIMUM, checkArgon2Cost, type Argon2Cost } from './argon2.js'

export { ConfigError } from './config-error.js'
export type { Env } from './env.js'
export type { TracingConfig } from './tracing.js'
export { DEV_JWT_SECRET, SECRET_PLACEHOLDER } from './jwt.js'
export { ARGON2_MINIMUM } from './argon2.js'

export type Profile = 'development' | 'production'

export interface Config {
  readonly profile: Profile
  readonly port: number
  readonly host: string
  readonly databaseUrl: string | undefined
  /** Where migrations run: DATABASE_MIGRATION_URL (a direct connection beside a pooler), or DATABASE_URL. */
  readonly databaseMigrationUrl: string | undefined
  /** `on-start`: each start applies pending migrations; `off`: `npm run cli -- migrate` does. */
  readonly migrations: 'on-start' | 'off'
  readonly jwt: TokenKeys & {
    readonly expirationMs: number
    readonly issuer: string
    readonly audience: string
  }
  readonly logLevel: string
  readonly management: { readonly port: number | null, readonly host: string }
  readonly trustProxy: boolean | readonly string[]
  readonly argon2: Argon2Cost
  readonly hashConcurrency: number
  /** libuv's thread pool, where argon2 runs: UV_THREADPOOL_SIZE, else libuv's 4. */
  readonly threadPoolSize: number
  readonly dbPoolMax: number
  readonly redisUrl: string | undefined
  readonly rateLimits: boolean
  readonly corsOrigins: readonly string[]
  /** Where clients reach the API (the OpenAPI document's server); unset: the listener's own address. */
  readonly publicUrl: string | undefined
  readonly shutdownDrainMs: number
  /** OpenTelemetry tracing, when an OTLP endpoint is set; undefined: off. */
  readonly tracing: TracingConfig | undefined
  readonly seed: { readonly admin: { readonly email: string, readonly password: string }, readonly user: { readonly email: string, readonly password: string } }
}


/** Validates the environment and returns the frozen configuration, or throws one ConfigError. */
export function loadConfig (source: Record<string, string | undefined>): Config {
  // An empty variable means "unset", as in most shells' `VAR= cmd`.
  const given = Object.keys(source).filter((k) => source[k] !== undefined && source[k] !== '')
  const raw = Object.fromEntries(given.filter((k) => k in EnvSchema.properties).map((k) => [k, source[k]]))
  // Only plain decimals become numbers: "1e3", "0x10" or " 80" stay strings, and fail.
  const values = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, takesInteger(EnvSchema.properties[k as keyof Env]) && /^(0|[1-9][0-9]{0,14})$/.test(v!) ? Number(v) : v]))
  const error = Value.Errors(EnvSchema, values).First()
  if (error) {
    const variable = error.path.slice(1)
    const schema = (EnvSchema.properties as Record<string, { description?: string, minimum?: number }>)[variable]
    const rule = schema?.description ?? (schema?.minimum !== undefined ? integerRule(schema) : 'is invalid')
    throw new ConfigError(variable, `${rule} (${quotedValue(variable, String(raw[variable]))})`)
  }
  const env = values as Env
  // NODE_ENV is not ours to read (CONTRACT §1's switch is APP_PROFILE), but a deployment saying
  // "production" there and nothing here would run development's seeded admin in production.
  if (env.APP_PROFILE === undefined && source.NODE_ENV === 'production') {
    throw new ConfigError('APP_PROFILE', 'must be set when NODE_ENV=production: unset, it means development (in-process PGlite, DATABASE_URL ignored, the seed accounts and their published passwords); set APP_PROFILE=production')
  }
  const profile: Profile = env.APP_PROFILE ?? 'development'
  const production = profile === 'production'
  const host = env.HOST ?? (production ? '0.0.0.0' : '127.0.0.1')
  const threadPoolSize = env.UV_THREADPOOL_SIZE ?? 4

  const config: Config = {
    profile,
    port: env.PORT ?? 8080,
    host,
    databaseUrl: checkedDatabaseUrl('DATABASE_URL', env.DATABASE_URL),
    databaseMigrationUrl: checkedDatabaseUrl('DATABASE_MIGRATION_URL', env.DATABASE_MIGRATION_URL) ?? env.DATABASE_URL,
    migrations: env.MIGRATIONS ?? 'on-start',
    jwt: {
      ...tokenKeys(env, production),
      expirationMs: env.JWT_EXPIRATION ?? 86_400_000,
      issuer: env.JWT_ISSUER ?? 'user-management',
      audience: env.JWT_AUDIENCE ?? 'user-management'
    },
    logLevel: env.LOG_LEVEL ?? 'info',
    management: {
      port: env.MANAGEMENT_PORT === 'off' ? null : env.MANAGEMENT_PORT ?? 9090,
      host: env.MANAGEMENT_HOST ?? host
    },
    trustProxy: parseTrustProxy(env.TRUST_PROXY ?? 'false'),
    argon2: {
      memoryCost: env.ARGON2_MEMORY_KIB ?? ARGON2_MINIMUM.memoryCost,
      timeCost: env.ARGON2_ITERATIONS ?? ARGON2_MINIMUM.timeCost,
      parallelism: env.ARGON2_PARALLELISM ?? ARGON2_MINIMUM.parallelism
    },
    // The cores, but below the thread pool (CONTRACT §3): a hash beyond it would wait inside libuv,
    // out of the hash queue's bounds, with file and DNS work behind it.
    hashConcurrency: env.HASH_CONCURRENCY ?? Math.max(1, Math.min(availableParallelism(), threadPoolSize - 1)),
    threadPoolSize,
    dbPoolMax: env.DB_POOL_MAX ?? 10,
    redisUrl: checkedRedisUrl(env.REDIS_URL),
    rateLimits: (env.RATE_LIMITS ?? 'on') === 'on',
    corsOrigins: env.CORS_ORIGINS ? env.CORS_ORIGINS.split(',').map((o) => o.trim()) : [],
    publicUrl: env.PUBLIC_URL,
    shutdownDrainMs: env.SHUTDOWN_DRAIN_MS ?? (production ? 5000 : 0),
    tracing: tracingConfig(env),
    seed: {
      admin: { email: env.DEV_ADMIN_EMAIL ?? 'admin@example.com', password: env.DEV_ADMIN_PASSWORD ?? 'Admin1234' },
      user: { email: env.DEV_USER_EMAIL ?? 'user@example.com', password: env.DEV_USER_PASSWORD ?? 'User12345' }
    }
  }
  checkArgon2Cost(config.argon2, config.hashConcurrency, production)
  checkListeners(config)
  if (production) checkProduction(config, env, given)
  return deepFreeze(config)
}

function checkProduction (config: Config, env: Env, given: string[]): void {
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL', 'is required in production')
  if (config.jwt.algorithm === 'HS256') {
    checkSecret('JWT_SECRET', env.JWT_SECRET)
    if (env.JWT_SECRET_PREVIOUS !== undefined) checkSecret('JWT_SECRET_PREVIOUS', env.JWT_SECRET_PREVIOUS)
  }
  checkProductionTrustProxy(config.trustProxy)
  // Any DEV_* (CONTRACT §1), not only the seed's four: a development setting the schema does not know is still one.
  const devVariable = given.find((k) => k.startsWith('DEV_'))
  if (devVariable) throw new ConfigError(devVariable, 'must not be set in production (DEV_* variables are for development only)')
}

const WILDCARDS = new Set(['0.0.0.0', '::'])

/** The two listeners on one port would collide, the API listening first: said before either opens. */
function checkListeners ({ port, host, management }: Config): void {
  if (management.port !== port) return
  if (management.host === host || WILDCARDS.has(management.host) || WILDCARDS.has(host)) {
    throw new ConfigError('MANAGEMENT_PORT', `must differ from PORT (both ${port}) where the two listen on the same address`)
  }
}

function deepFreeze<T> (value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}
