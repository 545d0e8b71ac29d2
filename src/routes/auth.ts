import { randomUUID } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { InvalidCredentialsError } from '../domain-errors.js'
import { messages } from '../messages.js'
import { SIGNUP_LIMIT } from '../limits/policy.js'
import { requestSecurityEvent } from '../security-events.js'
import { BadRequest, FieldErrors, HttpError, errorResponses } from '../schemas/error-responses.js'
import { LoginBody, LoginResponse, SignupBody, SignupResponse } from '../schemas/users.js'

/** POST /auth/signup and POST /auth/login: public, no token. */
const authRoutes: FastifyPluginAsyncTypebox = async function (app) {
  const { usersRepository, passwords } = app

  app.post('/signup', {
    config: { public: true, rateLimit: SIGNUP_LIMIT },
    schema: {
      tags: ['auth'],
      summary: 'Create an account (always ROLE_USER)',
      body: SignupBody,
      response: { 201: SignupResponse, 400: BadRequest, 409: FieldErrors, ...errorResponses }
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
      summary: 'Exchange e-mail and password for a bearer token',
      body: LoginBody,
      response: { 200: LoginResponse, 400: BadRequest, ...errorResponses }
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
    const token = app.jwt.sign({ sub: user.username, role: user.role, uid: user.id }, { jti: randomUUID() })
    return { id: user.id, token, username: user.username, email: user.email }
  })

  // Every path under /auth/ is public (SPEC rule 1), so an unknown one is a plain 404, token or not.
  app.all('/*', { config: { public: true }, schema: { hide: true, response: { 404: HttpError } } }, async function (_request, reply) {
    return reply.notFound(messages.notFound)
  })
}

export default authRoutes
