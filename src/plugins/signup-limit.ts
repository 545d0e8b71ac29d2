import fp from 'fastify-plugin'
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit'
import type { Config } from '../config/index.js'
import { TooManyAttemptsError } from '../http/errors.js'
import { requestSecurityEvent } from '../telemetry/security-events.js'
import { signupStore } from '../limits/signup-store.js'

/**
 * The sign-up limit (@fastify/rate-limit, per address, IPv6 per /64; routes opt in with
 * `config: { rateLimit: SIGNUP_LIMIT }`).
 * @see https://github.com/fastify/fastify-rate-limit
 */
export default fp<{ config: Config }>(async function signupLimitPlugin (app, { config }) {
  if (!config.rateLimits) return

  const options: RateLimitPluginOptions = {
    global: false,
    nameSpace: `${app.limitsKeyPrefix}signup:`,
    // With Redis, a store that falls back to this instance's counters: Redis down never means no limit.
    ...(app.limitsRedis && app.limitsCounting ? { store: signupStore(app.limitsRedis, `${app.limitsKeyPrefix}signup:`, app.limitsCounting) } : {}),
    // The error handler shapes UMS_ errors as { statusCode, error, message } with our Spanish text.
    errorResponseBuilder: () => new TooManyAttemptsError(),
    // Retry-After on the 429, as CONTRACT §9 and the OpenAPI document say; not the plugin's counters.
    addHeadersOnExceeding: { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false },
    addHeaders: { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false, 'retry-after': true },
    onExceeded: (request) => requestSecurityEvent(request, 'excess_rate_limit_exceeded', { reason: 'signup' })
  }
  await app.register(rateLimit, options)
}, { fastify: '5.x', name: 'signup-limit', dependencies: ['limits-redis'] })
