import { availableParallelism } from 'node:os'
import { isIP } from 'node:net'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

/** Placeholder that SPEC.md prints where the real secret goes; never valid in production. */
export const SECRET_PLACEHOLDER = '<SIGNING_SECRET>'
export const DEV_JWT_SECRET = 'dev-only-insecure-jwt-secret-do-not-use-in-production'
/** OWASP's minimum argon2id cost; production refuses anything below it. */
export const ARGON2_MINIMUM = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

const int = (pattern: string, description: string) => Type.String({ pattern, description })
const POSITIVE = '^[1-9][0-9]{0,14}$'
const NON_NEGATIVE = '^(0|[1-9][0-9]{0,14})$'
const PORT = '^([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$'
const PORT_TEXT = 'must be an integer from 1 to 65535'

/**
 * Every environment variable of CONTRACT §1, as the strings the environment holds.
 * The description is the one-line complaint printed when a value does not match.
 */
const EnvSchema = Type.Object({
  APP_PROFILE: Type.Optional(Type.Union([Type.Literal('development'), Type.Literal('production')], { description: 'must be "development" or "production"' })),
  PORT: Type.Optional(int(PORT, PORT_TEXT)),
  HOST: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s]+$', description: 'must be a host name or address' })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://[^\\s]+$', description: 'must be a postgres:// or postgresql:// URL' })),
  JWT_SECRET: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_SECRET_PREVIOUS: Type.Optional(Type.String({ description: 'must be a string' })),
  JWT_EXPIRATION: Type.Optional(int(POSITIVE, 'must be a positive integer (milliseconds)')),
  JWT_ISSUER: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'must be a non-empty string' })),
  JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'must be a non-empty string' })),
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { description: 'must be one of fatal, error, warn, info, debug, trace, silent' })),
  MANAGEMENT_PORT: Type.Optional(Type.String({ pattern: `${PORT}|^off$`, description: `${PORT_TEXT}, or "off"` })),
  MANAGEMENT_HOST: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s]+$', description: 'must be a host name or address' })),
  TRUST_PROXY: Type.Optional(Type.String({ pattern: '^(true|false|[0-9]{1,2}|[0-9a-fA-F:.]+(/[0-9]{1,3})?(,\\s*[0-9a-fA-F:.]+(/[0-9]{1,3})?)*)$', description: 'must be false, true, a hop count or a comma-separated list of addresses/CIDRs' })),
  ARGON2_MEMORY_KIB: Type.Optional(int(POSITIVE, 'must be a positive integer (KiB)')),
  ARGON2_ITERATIONS: Type.Optional(int(POSITIVE, 'must be a positive integer')),
  ARGON2_PARALLELISM: Type.Optional(int('^([1-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])$', 'must be an integer from 1 to 255')),
  HASH_CONCURRENCY: Type.Optional(int('^([1-9]|[1-9][0-9]|1[01][0-9]|12[0-8])$', 'must be an integer from 1 to 128')),
  DB_POOL_MAX: Type.Optional(int('^([1-9]|[1-9][0-9]|[1-4][0-9]{2}|500)$', 'must be an integer from 1 to 500')),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://[^\\s]+$', description: 'must be a redis:// or rediss:// URL' })),
  RATE_LIMITS: Type.Optional(Type.Union([Type.Literal('on'), Type.Literal('off')], { description: 'must be "on" or "off"' })),
  PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', description: 'must be an http:// or https:// URL such as https://api.example.com' })),
  CORS_ORIGINS: Type.Optional(Type.String({ pattern: '^https?://[^\\s,/]+(,\\s*https?://[^\\s,/]+)*$', description: 'must be a comma-separated list of origins such as https://app.example.com' })),
  SHUTDOWN_DRAIN_MS: Type.Optional(int(NON_NEGATIVE, 'must be a non-negative integer (milliseconds)')),
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
  readonly jwt: { readonly secret: string, readonly previousSecret: string | undefined, readonly expirationMs: number, readonly issuer: string, readonly audience: string }
  readonly logLevel: string
  readonly management: { readonly port: number | null, readonly host: string }
  readonly trustProxy: boolean | number | string[]
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

/** A configuration that cannot run; its message is the single line the process prints. */
export class ConfigError extends Error {
  constructor (variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`)
    this.name = 'ConfigError'
  }
}

/** Validates the environment and returns the frozen configuration, or throws one ConfigError. */
export function loadConfig (source: Record<string, string | undefined>): Config {
  // An empty variable means "unset", as in most shells' `VAR= cmd`.
  const raw = Object.fromEntries(Object.entries(source).filter(([k, v]) => k in EnvSchema.properties && v !== undefined && v !== ''))
  const error = Value.Errors(EnvSchema, raw).First()
  if (error) {
    const variable = error.path.slice(1)
    const description = (EnvSchema.properties as Record<string, { description?: string }>)[variable]?.description ?? 'is invalid'
    throw new ConfigError(variable, `${description} (got ${JSON.stringify(String(error.value)).slice(0, 80)})`)
  }
  const env = raw as Env
  const profile: Profile = env.APP_PROFILE ?? 'development'
  const production = profile === 'production'
  const host = env.HOST ?? (production ? '0.0.0.0' : '127.0.0.1')

  const config: Config = {
    profile,
    port: Number(env.PORT ?? 8080),
    host,
    databaseUrl: env.DATABASE_URL,
    jwt: {
      secret: env.JWT_SECRET ?? (production ? '' : DEV_JWT_SECRET),
      previousSecret: env.JWT_SECRET_PREVIOUS,
      expirationMs: Number(env.JWT_EXPIRATION ?? 86_400_000),
      issuer: env.JWT_ISSUER ?? 'user-management',
      audience: env.JWT_AUDIENCE ?? 'user-management'
    },
    logLevel: env.LOG_LEVEL ?? 'info',
    management: {
      port: env.MANAGEMENT_PORT === 'off' ? null : Number(env.MANAGEMENT_PORT ?? 9090),
      host: env.MANAGEMENT_HOST ?? host
    },
    trustProxy: parseTrustProxy(env.TRUST_PROXY ?? 'false'),
    argon2: {
      memoryCost: Number(env.ARGON2_MEMORY_KIB ?? ARGON2_MINIMUM.memoryCost),
      timeCost: Number(env.ARGON2_ITERATIONS ?? ARGON2_MINIMUM.timeCost),
      parallelism: Number(env.ARGON2_PARALLELISM ?? ARGON2_MINIMUM.parallelism)
    },
    hashConcurrency: Number(env.HASH_CONCURRENCY ?? availableParallelism()),
    dbPoolMax: Number(env.DB_POOL_MAX ?? 10),
    redisUrl: env.REDIS_URL,
    rateLimits: (env.RATE_LIMITS ?? 'on') === 'on',
    corsOrigins: env.CORS_ORIGINS ? env.CORS_ORIGINS.split(',').map((o) => o.trim()) : [],
    publicUrl: env.PUBLIC_URL,
    shutdownDrainMs: Number(env.SHUTDOWN_DRAIN_MS ?? (production ? 5000 : 0)),
    seed: {
      admin: { email: env.DEV_ADMIN_EMAIL ?? 'admin@example.com', password: env.DEV_ADMIN_PASSWORD ?? 'Admin1234' },
      user: { email: env.DEV_USER_EMAIL ?? 'user@example.com', password: env.DEV_USER_PASSWORD ?? 'User12345' }
    }
  }
  if (production) checkProduction(config, env)
  return deepFreeze(config)
}

function checkProduction (config: Config, env: Env): void {
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL', 'is required in production')
  checkSecret('JWT_SECRET', env.JWT_SECRET)
  if (env.JWT_SECRET_PREVIOUS !== undefined) checkSecret('JWT_SECRET_PREVIOUS', env.JWT_SECRET_PREVIOUS)
  if (config.trustProxy === true) {
    throw new ConfigError('TRUST_PROXY', 'must not be "true" in production: it would believe any client\'s X-Forwarded-For; give the balancers\' hop count or addresses')
  }
  const devVariable = Object.keys(EnvSchema.properties).find((k) => k.startsWith('DEV_') && env[k as keyof Env] !== undefined)
  if (devVariable) throw new ConfigError(devVariable, 'must not be set in production (development seed accounts only)')
  const weak = ([['ARGON2_MEMORY_KIB', 'memoryCost'], ['ARGON2_ITERATIONS', 'timeCost'], ['ARGON2_PARALLELISM', 'parallelism']] as const)
    .find(([, key]) => config.argon2[key] < ARGON2_MINIMUM[key])
  if (weak) throw new ConfigError(weak[0], `must be at least ${ARGON2_MINIMUM[weak[1]]} in production (OWASP minimum for argon2id)`)
}

function checkSecret (variable: string, secret: string | undefined): void {
  if (secret === undefined) throw new ConfigError(variable, 'is required in production')
  if (secret === SECRET_PLACEHOLDER || secret === DEV_JWT_SECRET) throw new ConfigError(variable, 'is the placeholder or development secret; use a strong random value')
  if (Buffer.byteLength(secret) < 32) throw new ConfigError(variable, 'must be at least 32 bytes long in production')
  if (new Set(secret).size === 1) throw new ConfigError(variable, 'must not be one repeated character')
}

function parseTrustProxy (value: string): boolean | number | string[] {
  if (value === 'true') return true
  if (value === 'false') return false
  if (/^[0-9]+$/.test(value)) return Number(value)
  const list = value.split(',').map((s) => s.trim())
  const bad = list.find((entry) => {
    const [address, bits] = entry.split('/')
    const family = isIP(address)
    return family === 0 || (bits !== undefined && Number(bits) > (family === 4 ? 32 : 128))
  })
  if (bad) throw new ConfigError('TRUST_PROXY', `has an invalid address or CIDR (got ${JSON.stringify(bad)})`)
  return list
}

function deepFreeze<T> (value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner)
    Object.freeze(value)
  }
  return value
}
