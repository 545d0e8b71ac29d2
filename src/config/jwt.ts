import { ConfigError } from './config-error.js'
import type { Env } from './env.js'
import { KeyProblem, digestKeyFrom, digestKeyOf, loadSigningKey, type AsymmetricAlgorithm, type JwtAlgorithm, type SigningKey } from './signing-keys.js'

/** Placeholder that SPEC.md prints where the real secret goes; never valid in production. */
export const SECRET_PLACEHOLDER = '<SIGNING_SECRET>'
export const DEV_JWT_SECRET = 'dev-only-insecure-jwt-secret-do-not-use-in-production'

/** The signing and verification keys of Config['jwt']. */
export interface TokenKeys {
  readonly algorithm: JwtAlgorithm
  /** HS256's JWT_SECRET and JWT_SECRET_PREVIOUS; empty and unset with EdDSA or ES256. */
  readonly secret: string
  readonly previousSecret: string | undefined
  /** EdDSA or ES256: JWT_PRIVATE_KEY and JWT_PRIVATE_KEY_PREVIOUS; unset with HS256. */
  readonly keys: { readonly current: SigningKey, readonly previous: SigningKey | undefined } | undefined
  /** The key of every HMAC that is not a token (e-mail digests in logs and limiter keys): see digestKeyFrom. */
  readonly digestKey: string
}

/**
 * HS256 signs with JWT_SECRET; EdDSA and ES256 with JWT_PRIVATE_KEY. A variable of the other
 * mode is refused rather than ignored: it would look in force while it is not.
 */
export function tokenKeys (env: Env, production: boolean): TokenKeys {
  const algorithm = env.JWT_ALGORITHM ?? 'HS256'
  const other = (algorithm === 'HS256' ? ['JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_PREVIOUS'] as const : ['JWT_SECRET', 'JWT_SECRET_PREVIOUS'] as const)
    .find((variable) => env[variable] !== undefined)
  if (algorithm === 'HS256') {
    if (other) throw new ConfigError(other, 'is used only with JWT_ALGORITHM EdDSA or ES256; set JWT_ALGORITHM, or unset it')
    const secret = env.JWT_SECRET ?? (production ? '' : DEV_JWT_SECRET)
    // As with the keys: a rotation that forgot to change the current one would look done.
    if (env.JWT_SECRET_PREVIOUS === secret) throw new ConfigError('JWT_SECRET_PREVIOUS', 'is the same secret as JWT_SECRET; give the former secret, or unset it')
    return { algorithm, secret, previousSecret: env.JWT_SECRET_PREVIOUS, keys: undefined, digestKey: digestKeyFrom(secret) }
  }
  if (other) throw new ConfigError(other, `is not used with JWT_ALGORITHM=${algorithm} (tokens are signed with JWT_PRIVATE_KEY); unset it`)
  if (env.JWT_PRIVATE_KEY === undefined) throw new ConfigError('JWT_PRIVATE_KEY', `is required with JWT_ALGORITHM=${algorithm} (npm run cli -- generate-key ${algorithm})`)
  const current = signingKey('JWT_PRIVATE_KEY', env.JWT_PRIVATE_KEY, algorithm)
  const previous = env.JWT_PRIVATE_KEY_PREVIOUS === undefined ? undefined : signingKey('JWT_PRIVATE_KEY_PREVIOUS', env.JWT_PRIVATE_KEY_PREVIOUS, algorithm)
  if (previous?.kid === current.kid) throw new ConfigError('JWT_PRIVATE_KEY_PREVIOUS', 'is the same key as JWT_PRIVATE_KEY; give the former key, or unset it')
  return { algorithm, secret: '', previousSecret: undefined, keys: { current, previous }, digestKey: digestKeyOf(current) }
}

function signingKey (variable: string, value: string, algorithm: AsymmetricAlgorithm): SigningKey {
  try {
    return loadSigningKey(value, algorithm)
  } catch (error) {
    if (error instanceof KeyProblem) throw new ConfigError(variable, error.message)
    throw error
  }
}

/** Production's refusals of a weak HS256 secret (CONTRACT §1). */
export function checkSecret (variable: string, secret: string | undefined): void {
  if (secret === undefined) throw new ConfigError(variable, 'is required in production')
  if (secret === SECRET_PLACEHOLDER || secret === DEV_JWT_SECRET) throw new ConfigError(variable, 'is the placeholder or development secret; use a strong random value')
  if (Buffer.byteLength(secret) < 32) throw new ConfigError(variable, 'must be at least 32 bytes long in production')
  if (new Set(secret).size === 1) throw new ConfigError(variable, 'must not be one repeated character')
}

