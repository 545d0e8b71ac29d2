// The database-bound ceiling (issue 13): a bare node:http server doing only the work the
// contract makes essential, on the service's database. GET /users/me: verify the HS256 token
// with fast-jwt (cached, the service's alg/iss/aud/typ/claim checks), check the role, read the
// optional JSON body's e-mail, read the row by primary key with postgres.js, JSON.stringify it.
// GET /admin/users: the same token check and look-up, then `select id, username, email, role
// from users order by id` and JSON.stringify. POST /auth/login: read the JSON body, the row by
// e-mail, argon2 verify (one hash at a time, as the service's HASH_CONCURRENCY=1; a dummy hash for
// an unknown e-mail), sign the service's token with fast-jwt, JSON.stringify the answer.
// POST /auth/signup: read the JSON body, argon2 hash (in the same turn), insert the row, answer
// its id, username and e-mail. Those two are the limits a login and a sign-up over HTTP and a
// database can reach beside raw argon2 (bench/login-cost.js, bench/run.js).
// No framework, validation, request id, log line or metrics.
// postgres.js with its defaults (10 connections, prepared statements) but no pipelining: under
// sustained load its pool's queue of busy connections never empties, and each pipelined query
// scans it with indexOf (src/queue.js keeps every shifted slot until the queue is empty), so a
// pipelining ceiling grows slower the longer it runs. Without it the ceiling holds its speed.
// CEILING_BATCH=1, the batched ceiling (issue 25): the look-ups of one turn of the event loop
// share one `where id = any($1)` statement, as the service's do (collected until setImmediate).
// Env: DATABASE_URL, JWT_SECRET, JWT_ISSUER, JWT_AUDIENCE (as the service), PORT; CEILING_POOL_MAX and
// CEILING_MAX_PIPELINE (postgres.js's max and max_pipeline: 10 and 0);
// LISTING_DESIGN=<name> serves the listing with a design of bench/listing-designs.js instead.
// Usage: npm run build && DATABASE_URL=… JWT_SECRET=… PORT=18091 node bench/db-ceiling.js
import { randomUUID } from 'node:crypto'
import http from 'node:http'
import argon2 from 'argon2'
import postgres from 'postgres'
import { argon2Options, dummyHashOf, hashWithSalt } from '../dist/users/password-manager.js'
import { usernameKey } from '../dist/users/user.js'
import { ARGON2_COST, ceilingSigner, ceilingVerifier, userLookUp } from './lib.js'

const env = process.env
const sql = postgres(env.DATABASE_URL, { max: Number(env.CEILING_POOL_MAX ?? 10), max_pipeline: Number(env.CEILING_MAX_PIPELINE ?? 0), onnotice: () => {} })
const verify = ceilingVerifier(env)
const lookUp = userLookUp(sql, { batched: env.CEILING_BATCH === '1' })
const sign = ceilingSigner(env)
const hashOptions = argon2Options(ARGON2_COST)
// The service's, made without hashing: no ceiling holds an argon2 block before its first login.
const dummyHash = dummyHashOf(ARGON2_COST)
let hashing = Promise.resolve()
/**
 * One hash or verify in flight at a time, the next queued behind it. Not the service's work queue:
 * its bounds (64 waiting, 2 s) answer 503 in a slow phase, and a ceiling refuses nothing.
 */
function inTurn (work) {
  const turn = hashing.then(work)
  hashing = turn.catch(() => {})
  return turn
}

const design = env.LISTING_DESIGN
const listUsers = design
  ? (await import('./listing-designs.js')).designs[design](sql)
  : async (res) => {
    const rows = await sql`select id, username, email, role from users order by id`
    send(res, 200, JSON.stringify(rows))
  }

const headers = (length) => ({ 'content-type': 'application/json; charset=utf-8', 'content-length': length, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' })
function send (res, status, text) {
  res.writeHead(status, headers(Buffer.byteLength(text)))
  res.end(text)
}

/** The token's claims if it is a valid access token of `role` whose user still exists, with the row. */
async function authorize (req, role) {
  const header = req.headers.authorization
  if (!header?.startsWith('Bearer ')) return undefined
  let claims
  try {
    claims = verify(header.slice(7))
  } catch {
    return undefined
  }
  if (claims.role !== role || !Number.isSafeInteger(claims.uid)) return undefined
  return await lookUp(claims.uid)
}

function readBody (req) {
  return new Promise((resolve, reject) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (chunk) => { body += chunk })
    req.on('end', () => resolve(body))
    req.on('error', reject)
  })
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.url === '/users/me') {
      const [user, body] = await Promise.all([authorize(req, 'ROLE_USER'), readBody(req)])
      if (!user) return send(res, 401, '{"message":"Token inválido"}')
      const email = body ? JSON.parse(body).email : undefined
      if (email !== undefined && email.toLowerCase() !== user.email) return send(res, 403, '{"message":"Acceso denegado"}')
      return send(res, 200, JSON.stringify(user))
    }
    if (req.url === '/auth/login' && req.method === 'POST') {
      const { email, password } = JSON.parse(await readBody(req))
      if (typeof email !== 'string' || typeof password !== 'string') return send(res, 400, '{"message":"Solicitud inválida"}')
      const [row] = await sql`select id, username, email, role, password_hash from users where email = ${email.toLowerCase()}`
      const valid = await inTurn(() => argon2.verify(row?.password_hash ?? dummyHash, password))
      if (!row || !valid) return send(res, 401, '{"message":"Credenciales inválidas"}')
      const token = sign({ sub: row.username, role: row.role, uid: row.id, jti: randomUUID() })
      return send(res, 200, JSON.stringify({ id: row.id, token, username: row.username, email: row.email }))
    }
    if (req.url === '/auth/signup' && req.method === 'POST') {
      const { username, email, password } = JSON.parse(await readBody(req))
      if (typeof username !== 'string' || typeof email !== 'string' || typeof password !== 'string') return send(res, 400, '{"message":"Solicitud inválida"}')
      const passwordHash = await inTurn(() => hashWithSalt(hashOptions, password))
      const [row] = await sql`insert into users (username, username_key, email, password_hash)
        values (${username}, ${usernameKey(username)}, ${email.toLowerCase()}, ${passwordHash}) returning id, username, email`
      return send(res, 201, JSON.stringify(row))
    }
    if (req.url === '/admin/users') {
      req.resume()
      if (!await authorize(req, 'ROLE_ADMIN')) return send(res, 401, '{"message":"Token inválido"}')
      return await listUsers(res)
    }
    req.resume()
    send(res, 404, '{"message":"No encontrado"}')
  } catch (error) {
    // A client that leaves mid-listing (the load generator stops) is no error of ours.
    if (res.destroyed) return
    process.stderr.write(`db-ceiling: ${error.stack}\n`)
    res.headersSent ? res.destroy() : send(res, 500, '{"message":"Error interno del servidor"}')
  }
})
server.keepAliveTimeout = 65_000
server.listen(Number(env.PORT ?? 18091), '127.0.0.1')
process.on('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  sql.end({ timeout: 1 }).finally(() => process.exit(0))
})
