import { randomUUID } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { InvalidCredentialsError } from '../http/errors.js'
import { messages } from '../http/messages.js'
import { FAMILIAR_MS, LOGIN_LIMITS, LOGIN_WINDOW_MS, SIGNUP_LIMIT } from '../limits/policy.js'
import { requestSecurityEvent } from '../telemetry/security-events.js'
import { ref } from '../schemas/common.js'
import { badRequestReply, commonReplies, duplicateReply, errorReply, unavailableReply } from '../http/error-responses.js'
import { headers, jsonResponse } from '../schemas/responses.js'
import { LoginBody, LoginResponse, SignupBody, SignupResponse, loginExample } from '../schemas/users.js'

// The limits as the OpenAPI document states them (CONTRACT §9).
const signups = `${SIGNUP_LIMIT.max} sign-ups in ${SIGNUP_LIMIT.timeWindow / 1000} s`

/** POST /auth/signup and POST /auth/login: public, no token. */
const authRoutes: FastifyPluginAsyncTypebox = async function (app) {
  const { usersRepository, passwords } = app

  app.post('/signup', {
    config: { public: true, rateLimit: SIGNUP_LIMIT },
    schema: {
      tags: ['auth'],
      operationId: 'signUp',
      summary: 'Create an account (always ROLE_USER)',
      description: `Public. The e-mail is stored lower-cased; usernames are unique without regard to case. Limited to ${signups} per client address.`,
      security: [],
      body: ref(SignupBody),
      response: {
        201: jsonResponse('The account was created, with ROLE_USER.', ref(SignupResponse), { example: { id: 3, username: 'ana', email: 'ana@example.com' } }),
        400: badRequestReply('The body failed validation (one message per failing field), or is absent, not JSON, or not an object.', {
          username: messages.fields.username.length, email: messages.fields.email.format, password: messages.fields.password.format
        }, ['bodyMissing', 'bodyMalformed', 'bodyNotObject']),
        409: duplicateReply,
        ...commonReplies,
        429: errorReply(429, `More than ${signups} from this client address.`, ['tooManyAttempts'], headers.retryAfter),
        503: unavailableReply('The database is unreachable, or password hashing is saturated.')
      }
    }
  }, async function (request, reply) {
    const { username, email, password } = request.body
    const passwordHash = await passwords.hash(password)
    const user = await usersRepository.create({ username, email, passwordHash })
    requestSecurityEvent(request, 'user_created', { userId: user.id })
    return reply.code(201).send({ id: user.id, username: user.username, email: user.email })
  })

  app.post('/login', {
    config: { public: true },
    schema: {
      tags: ['auth'],
      operationId: 'logIn',
      summary: 'Exchange e-mail and password for a bearer token',
      description: `Public. The e-mail matches without regard to case. Failed logins are limited: ${LOGIN_LIMITS.pair} in ${LOGIN_WINDOW_MS / 60_000} minutes per client address and e-mail, ${LOGIN_LIMITS.email} per e-mail, ${LOGIN_LIMITS.address} per address.`,
      security: [],
      body: ref(LoginBody),
      response: {
        200: jsonResponse('The credentials are right: the account and a bearer token for it.', ref(LoginResponse), { example: loginExample }),
        400: badRequestReply('The body failed validation (one message per failing field), or is absent, not JSON, or not an object.', {
          email: messages.fields.email.format, password: messages.fields.password.missing
        }, ['bodyMissing', 'bodyMalformed', 'bodyNotObject']),
        401: errorReply(401, 'Wrong password or unknown e-mail: the same answer, in about the same time.', ['badCredentials']),
        ...commonReplies,
        429: errorReply(429, `Too many failed logins for this address and e-mail, for this e-mail (except from an address this account signed in from within ${FAMILIAR_MS / 86_400_000} days), or from this address; refused before the password is checked.`, ['tooManyAttempts'], headers.retryAfter),
        503: unavailableReply('The database is unreachable, password hashing is saturated, or logins still being checked for this address or e-mail fill a limit. Not counted as a failed login.')
      }
    }
  }, async function (request, reply) {
    const { email, password } = request.body
    // §9: counted in flight (or refused) before any hashing, whether the account exists or not.
    const attempt = await app.loginLimiter.begin(request, reply, email)
    const check = await passwords.checkLogin(password, () => usersRepository.findByEmail(email)).catch(async (error: unknown) => {
      // A 503 (hashing saturated, database down) is no failed attempt: only failures count.
      await attempt.abandoned()
      throw error
    })
    const user = check.account
    if (!user || !check.valid) {
      await attempt.failed()
      requestSecurityEvent(request, 'authn_login_fail', user ? { userId: user.id } : { emailHmac: attempt.emailHmac })
      throw new InvalidCredentialsError()
    }
    await attempt.succeeded(user.id)
    requestSecurityEvent(request, 'authn_login_success', { userId: user.id })
    if (check.needsRehash) {
      try {
        await usersRepository.updatePasswordHash(user.id, await passwords.hash(password))
      } catch (error) {
        request.log.warn({ err: error, userId: user.id }, 'password re-hash failed; login goes on')
      }
    }
    // jti in the payload, not as a sign option: options make @fastify/jwt build a new signer (and key) per call.
    const token = app.jwt.sign({ sub: user.username, role: user.role, uid: user.id, jti: randomUUID() })
    return { id: user.id, token, username: user.username, email: user.email }
  })

  // Every path under /auth/ is public (SPEC rule 1), so an unknown one is a plain 404, token or not.
  app.all('/*', { config: { public: true }, schema: { hide: true, response: { 404: errorReply(404, 'No such path under /auth/.', ['notFound']) } } }, async function (_request, reply) {
    return reply.notFound(messages.notFound)
  })
}

export default authRoutes
