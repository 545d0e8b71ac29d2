import { availableParallelism } from 'node:os'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { ConfigError } from './config-error.js'
import { DatabaseUrlError, parseDatabaseUrl } from './config/database-url.js'
import { checkProductionTrustProxy, parseTrustProxy } from './limits/trust-proxy.js'
import { JWT_ALGORITHMS, type JwtAlgorithm, type SigningKey } from './tokens/signing-keys.js'
import { checkSecret, tokenKeys } from './tokens/token-config.js'

export { ConfigError } from './config-error.js'
export { DEV_JWT_SECRET, SECRET_PLACEHOLDER } from './tokens/token-config.js'
/** OWASP's minimum argon2id cost; production refuses anything below it. */
export const ARGON2_MINIMUM = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

/** An integer variable; its complaint is written from its bounds (see `integerRule`). */
const int = (minimum: number, maximum?: number, unit?: string) =>
  Type.Integer({ minimum, ...(maximum === undefined ? {} : { maximum }), ...(unit ? { unit } : {}) })
const Port = int(1, 65535)

/** An integer variable, or one that also takes a word (MANAGEMENT_PORT: a port or "off"). */
const takesInteger = (schema: { type?: unknown, anyOf?: unknown[] }): boolean =>
  schema.type === 'integer' || (schema.anyOf ?? []).some((inner) => takesInteger(inner as typeof schema))

/** "must be an integer from 1 to 65535", "must be a positive integer (KiB)", … */
function integerRule ({ minimum, maximum, unit }: { minimum?: number, maximum?: number, unit?: string }): string {
  const range = maximum !== undefined ? `an integer from ${minimum} to ${maximum}`
    : minimum === 0 ? 'a non-negative integer' : minimum === 1 ? 'a positive integer' : `an integer of at least ${minimum}`
  return `must be ${range}${unit ? ` (${unit})` : ''}`
}

/**
 * Every environment variable of CONTRACT §1. Integers are converted from their strict decimal
 * form first; the description, or an integer's bounds, is the one-line complaint printed when
 * a value does not match.
 */
const EnvSchema = Type.Object({
  APP_PROFILE: Type.Optional(Type.Union([Type.Literal('development'), Type.Literal('production')], { description: 'must be "development" or "production"' })),
  PORT: Type.Optional(Port),
  HOST: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s]+$', description: 'must be a host name or address' })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://[^\\s]+$', description: 'must be a postgres:// or postgresql:// URL' })),
  DATABASE_MIGRATION_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://[^\\s]+$', description: 'must be a postgres:// or postgresql:// URL' })),
  MIGRATIONS: Type.Optional(Type.Union([Type.Literal('on-start'), Type.Literal('off')], { description: 'must be "on-start" or "off"' })),
  JWT_SECRET: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_SECRET_PREVIOUS: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_ALGORITHM: Type.Optional(Type.Union(JWT_ALGORITHMS.map((a) => Type.Literal(a)), { description: `must be one of ${JWT_ALGORITHMS.join(', ')}` })),
  JWT_PRIVATE_KEY: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_PRIVATE_KEY_PREVIOUS: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_EXPIRATION: Type.Optional(int(1, undefined, 'milliseconds')),
  JWT_ISSUER: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'must be a non-empty string' })),
  JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'must be a non-empty string' })),
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { description: 'must be one of fatal, error, warn, info, debug, trace, silent' })),
  MANAGEMENT_PORT: Type.Optional(Type.Union([Port, Type.Literal('off')], { description: `${integerRule(Port)}, or "off"` })),
  MANAGEMENT_HOST: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s]+$', description: 'must be a host name or address' })),
  // A bare number passes the schema only to be refused with its own message (parseTrustProxy).
  TRUST_PROXY: Type.Optional(Type.String({ pattern: '^(true|false|[0-9a-zA-Z:./]+(,\\s*[0-9a-zA-Z:./]+)*)$', description: 'must be false, true or a comma-separated list of the balancers\' addresses/CIDRs (or loopback, linklocal, uniquelocal)' })),
  ARGON2_MEMORY_KIB: Type.Optional(int(1, undefined, 'KiB')),
  ARGON2_ITERATIONS: Type.Optional(int(1)),
  ARGON2_PARALLELISM: Type.Optional(int(1, 255)),
  HASH_CONCURRENCY: Type.Optional(int(1, 128)),
  DB_POOL_MAX: Type.Optional(int(1, 500)),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://[^\\s]+$', description: 'must be a redis:// or rediss:// URL' })),
  RATE_LIMITS: Type.Optional(Type.Union([Type.Literal('on'), Type.Literal('off')], { description: 'must be "on" or "off"' })),
  PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', description: 'must be an http:// or https:// URL such as https://api.example.com' })),
  CORS_ORIGINS: Type.Optional(Type.String({ pattern: '^https?://[^\\s,/]+(,\\s*https?://[^\\s,/]+)*$', description: 'must be a comma-separated list of origins such as https://app.example.com' })),
  SHUTDOWN_DRAIN_MS: Type.Optional(int(0, undefined, 'milliseconds')),
  DEV_ADMIN_EMAIL: Type.Optional(Type.String({ pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', description: 'must be an e-mail address' })),
  DEV_ADMIN_PASSWORD: Type.Optional(Type.String({ minLength: 1, description: 'must be a non-empty string' })),
  DEV_USER_EMAIL: Type.Optional(Type.String({ pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', description: 'must be an e-mail address' })),
  DEV_USER_PASSWORD: Type.Optional(Type.String({ minLength: 1, description: 'must be a non-empty string' }))
})
export type Env = Static<typeof EnvSchema>

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
  readonly jwt: {
    readonly algorithm: JwtAlgorithm
    /** HS256's JWT_SECRET and JWT_SECRET_PREVIOUS; empty and unset with EdDSA or ES256. */
    readonly secret: string
    readonly previousSecret: string | undefined
    /** EdDSA or ES256: JWT_PRIVATE_KEY and JWT_PRIVATE_KEY_PREVIOUS; unset with HS256. */
    readonly keys: { readonly current: SigningKey, readonly previous: SigningKey | undefined } | undefined
    /** The key of every HMAC that is not a token (e-mail digests in logs and limiter keys). */
    readonly digestKey: string
    readonly expirationMs: number
    readonly issuer: string
    readonly audience: string
  }
  readonly logLevel: string
  readonly management: { readonly port: number | null, readonly host: string }
  readonly trustProxy: boolean | readonly string[]
  readonly argon2: { readonly memoryCost: number, readonly timeCost: number, readonly parallelism: number }
  readonly hashConcurrency: number
  readonly dbPoolMax: number
  readonly redisUrl: string | undefined
  readonly rateLimits: boolean
  readonly corsOrigins: readonly string[]
  /** Where clients reach the API (the OpenAPI document's server); unset: the listener's own address. */
  readonly publicUrl: string | undefined
  readonly shutdownDrainMs: number
  readonly seed: { readonly admin: { readonly email: string, readonly password: string }, readonly user: { readonly email: string, readonly password: string } }
}


/** Validates the environment and returns the frozen configuration, or throws one ConfigError. */
export function loadConfig (source: Record<string, string | undefined>): Config {
  // An empty variable means "unset", as in most shells' `VAR= cmd`.
  const raw = Object.fromEntries(Object.entries(source).filter(([k, v]) => k in EnvSchema.properties && v !== undefined && v !== ''))
  // Only plain decimals become numbers: "1e3", "0x10" or " 80" stay strings, and fail.
  const values = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, takesInteger(EnvSchema.properties[k as keyof Env]) && /^(0|[1-9][0-9]{0,14})$/.test(v!) ? Number(v) : v]))
  const error = Value.Errors(EnvSchema, values).First()
  if (error) {
    const variable = error.path.slice(1)
    const schema = (EnvSchema.properties as Record<string, { description?: string, minimum?: number }>)[variable]
    const rule = schema?.description ?? (schema?.minimum !== undefined ? integerRule(schema) : 'is invalid')
    throw new ConfigError(variable, `${rule} (got ${JSON.stringify(String(raw[variable])).slice(0, 80)})`)
  }
  const env = values as Env
  const profile: Profile = env.APP_PROFILE ?? 'development'
  const production = profile === 'production'
  const host = env.HOST ?? (production ? '0.0.0.0' : '127.0.0.1')

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
    hashConcurrency: env.HASH_CONCURRENCY ?? availableParallelism(),
    dbPoolMax: env.DB_POOL_MAX ?? 10,
    redisUrl: env.REDIS_URL,
    rateLimits: (env.RATE_LIMITS ?? 'on') === 'on',
    corsOrigins: env.CORS_ORIGINS ? env.CORS_ORIGINS.split(',').map((o) => o.trim()) : [],
    publicUrl: env.PUBLIC_URL,
    shutdownDrainMs: env.SHUTDOWN_DRAIN_MS ?? (production ? 5000 : 0),
    seed: {
      admin: { email: env.DEV_ADMIN_EMAIL ?? 'admin@example.com', password: env.DEV_ADMIN_PASSWORD ?? 'Admin1234' },
      user: { email: env.DEV_USER_EMAIL ?? 'user@example.com', password: env.DEV_USER_PASSWORD ?? 'User12345' }
    }
  }
  if (production) checkProduction(config, env)
  return deepFreeze(config)
}

/** A URL libpq would take and this service can honour, or a ConfigError saying what is wrong with it. */
function checkedDatabaseUrl (variable: string, url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  try {
    parseDatabaseUrl(url)
  } catch (error) {
    if (error instanceof DatabaseUrlError) throw new ConfigError(variable, error.message)
    throw error
  }
  return url
}

function checkProduction (config: Config, env: Env): void {
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL', 'is required in production')
  if (config.jwt.algorithm === 'HS256') {
    checkSecret('JWT_SECRET', env.JWT_SECRET)
    if (env.JWT_SECRET_PREVIOUS !== undefined) checkSecret('JWT_SECRET_PREVIOUS', env.JWT_SECRET_PREVIOUS)
  }
  checkProductionTrustProxy(config.trustProxy)
  const devVariable = Object.keys(EnvSchema.properties).find((k) => k.startsWith('DEV_') && env[k as keyof Env] !== undefined)
  if (devVariable) throw new ConfigError(devVariable, 'must not be set in production (development seed accounts only)')
  const weak = ([['ARGON2_MEMORY_KIB', 'memoryCost'], ['ARGON2_ITERATIONS', 'timeCost'], ['ARGON2_PARALLELISM', 'parallelism']] as const)
    .find(([, key]) => config.argon2[key] < ARGON2_MINIMUM[key])
  if (weak) throw new ConfigError(weak[0], `must be at least ${ARGON2_MINIMUM[weak[1]]} in production (OWASP minimum for argon2id)`)
}

function deepFreeze<T> (value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}
