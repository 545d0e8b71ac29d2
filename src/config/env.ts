import { Type, type Static } from '@sinclair/typebox'
import { JWT_ALGORITHMS } from './signing-keys.js'
import { ARGON2_MAXIMUM } from './argon2.js'

/** An integer variable; its complaint is written from its bounds (see `integerRule`). */
const int = (minimum: number, maximum?: number, unit?: string) =>
  Type.Integer({ minimum, ...(maximum === undefined ? {} : { maximum }), ...(unit ? { unit } : {}) })
const Port = int(1, 65535)
const OTLP_URL = '^https?://[^\\s/?#]+(/[^\\s?#]*)?$'
// OTLP over HTTP, protobuf (OpenTelemetry's default) or JSON; this service ships no gRPC exporter.
const OtlpProtocol = Type.Union([Type.Literal('http/protobuf'), Type.Literal('http/json')], { description: 'must be "http/protobuf" or "http/json" (OTLP over HTTP; gRPC is not shipped)' })
/** The samplers the OpenTelemetry Node SDK builds from OTEL_TRACES_SAMPLER. */
const TRACE_SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const

/** An integer variable, or one that also takes a word (MANAGEMENT_PORT: a port or "off"). */
export const takesInteger = (schema: { type?: unknown, anyOf?: unknown[] }): boolean =>
  schema.type === 'integer' || (schema.anyOf ?? []).some((inner) => takesInteger(inner as typeof schema))

/** "must be an integer from 1 to 65535", "must be a positive integer (KiB)", … */
export function integerRule ({ minimum, maximum, unit }: { minimum?: number, maximum?: number, unit?: string }): string {
  const range = maximum !== undefined ? `an integer from ${minimum} to ${maximum}`
    : minimum === 0 ? 'a non-negative integer' : minimum === 1 ? 'a positive integer' : `an integer of at least ${minimum}`
  return `must be ${range}${unit ? ` (${unit})` : ''}`
}

/**
 * Every environment variable of CONTRACT §1. Integers are converted from their strict decimal
 * form first; the description, or an integer's bounds, is the one-line complaint printed when
 * a value does not match.
 */
export const EnvSchema = Type.Object({
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
  JWT_ISSUER: Type.Optional(Type.String({ maxLength: 255, pattern: '\\S', description: 'must be a string with something other than spaces, up to 255 characters' })),
  JWT_AUDIENCE: Type.Optional(Type.String({ maxLength: 255, pattern: '\\S', description: 'must be a string with something other than spaces, up to 255 characters' })),
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { description: 'must be one of fatal, error, warn, info, debug, trace, silent' })),
  MANAGEMENT_PORT: Type.Optional(Type.Union([Port, Type.Literal('off')], { description: `${integerRule(Port)}, or "off"` })),
  MANAGEMENT_HOST: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s]+$', description: 'must be a host name or address' })),
  // A bare number passes the schema only to be refused with its own message (parseTrustProxy).
  TRUST_PROXY: Type.Optional(Type.String({ pattern: '^(true|false|[0-9a-zA-Z:./]+(,\\s*[0-9a-zA-Z:./]+)*)$', description: 'must be false, true or a comma-separated list of the balancers\' addresses/CIDRs (or loopback, linklocal, uniquelocal)' })),
  // argon2's own bounds; src/config/argon2.ts refuses what this machine cannot run.
  ARGON2_MEMORY_KIB: Type.Optional(int(1, ARGON2_MAXIMUM, 'KiB')),
  ARGON2_ITERATIONS: Type.Optional(int(1, ARGON2_MAXIMUM)),
  ARGON2_PARALLELISM: Type.Optional(int(1, 255)),
  HASH_CONCURRENCY: Type.Optional(int(1, 128)),
  // libuv's, not ours (only the start command can set it): read to keep hashing below it.
  UV_THREADPOOL_SIZE: Type.Optional(int(1, 1024)),
  DB_POOL_MAX: Type.Optional(int(1, 500)),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://[^\\s]+$', description: 'must be a redis:// or rediss:// URL' })),
  RATE_LIMITS: Type.Optional(Type.Union([Type.Literal('on'), Type.Literal('off')], { description: 'must be "on" or "off"' })),
  PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', description: 'must be an http:// or https:// URL such as https://api.example.com' })),
  CORS_ORIGINS: Type.Optional(Type.String({ pattern: '^https?://[^\\s,/]+(,\\s*https?://[^\\s,/]+)*$', description: 'must be a comma-separated list of origins such as https://app.example.com' })),
  SHUTDOWN_DRAIN_MS: Type.Optional(int(0, undefined, 'milliseconds')),
  DEV_ADMIN_EMAIL: Type.Optional(Type.String({ pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', description: 'must be an e-mail address' })),
  DEV_ADMIN_PASSWORD: Type.Optional(Type.String({ minLength: 1, description: 'must be a non-empty string' })),
  DEV_USER_EMAIL: Type.Optional(Type.String({ pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', description: 'must be an e-mail address' })),
  DEV_USER_PASSWORD: Type.Optional(Type.String({ minLength: 1, description: 'must be a non-empty string' })),
  // OpenTelemetry's own variables (src/config/tracing.ts): the SDK reads them; these are the ones checked first.
  // Any case, as the SDK reads it (the specification's booleans).
  OTEL_SDK_DISABLED: Type.Optional(Type.String({ pattern: '^(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$', description: 'must be "true" or "false"' })),
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: OTLP_URL, description: 'must be an http:// or https:// URL such as http://collector:4318' })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ pattern: OTLP_URL, description: 'must be an http:// or https:// URL such as http://collector:4318/v1/traces' })),
  OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(OtlpProtocol),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Type.Optional(OtlpProtocol),
  OTEL_TRACES_EXPORTER: Type.Optional(Type.Union([Type.Literal('otlp'), Type.Literal('none')], { description: 'must be "otlp" or "none"' })),
  OTEL_TRACES_SAMPLER: Type.Optional(Type.Union(TRACE_SAMPLERS.map((s) => Type.Literal(s)), { description: `must be one of ${TRACE_SAMPLERS.join(', ')}` })),
  OTEL_TRACES_SAMPLER_ARG: Type.Optional(Type.String({ pattern: '^(0(\\.[0-9]+)?|1(\\.0+)?)$', description: 'must be a sampling ratio from 0 to 1, such as 0.25' })),
  OTEL_BSP_MAX_QUEUE_SIZE: Type.Optional(int(1, 1_000_000, 'spans')),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: Type.Optional(int(1, 1_000_000, 'spans')),
  OTEL_BSP_SCHEDULE_DELAY: Type.Optional(int(0, 3_600_000, 'milliseconds')),
  OTEL_BSP_EXPORT_TIMEOUT: Type.Optional(int(1, 3_600_000, 'milliseconds')),
  // key=value lists, checked in src/config/tracing.ts without quoting them back (a header may hold a key).
  OTEL_EXPORTER_OTLP_HEADERS: Type.Optional(Type.String()),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: Type.Optional(Type.String()),
  OTEL_RESOURCE_ATTRIBUTES: Type.Optional(Type.String()),
  OTEL_EXPORTER_OTLP_TIMEOUT: Type.Optional(int(1, 3_600_000, 'milliseconds')),
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: Type.Optional(int(1, 3_600_000, 'milliseconds'))
})
export type Env = Static<typeof EnvSchema>
