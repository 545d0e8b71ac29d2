// GET /users/me on two builds of the service at once, for an A/B of a change to the request
// path: both on core 0 over one fresh PostgreSQL database, loaded in turn from core 1 (32
// connections, SPEC's own-info request), in the order A B B A A B … so that drift over the run
// falls on both. Prints each round and the means: requests per second and CPU per answer.
// Run it in both orders: on a 2-core machine the instance started second can measure slower
// even when both sides are the same build.
// Each folder needs its own build (npm run build) and node_modules (a link will do).
// Usage: node bench/me-ab.js <folder A> <folder B> [rounds = 6] [seconds = 5]
// Node's options for either: AB_ARGS_A, AB_ARGS_B (default: npm start's, as bench/run.js).
import { randomBytes } from 'node:crypto'
import { abRounds, createDatabase, meLoader, serviceNodeArgs, startService } from './lib.js'

const [dirA, dirB, rounds = '6', seconds = '5'] = process.argv.slice(2)
if (!dirA || !dirB) throw new Error('usage: node bench/me-ab.js <folder A> <folder B> [rounds] [seconds]')
const database = await createDatabase('ums_ab')
// As bench/run.js runs the service: the request line logged (LOG_LEVEL info), 4 threads; one secret for both.
const env = { LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '4', JWT_SECRET: randomBytes(36).toString('base64') }
const start = (dir, args, port) => startService({ databaseUrl: database.url, port, env, cpu: 0, dir, nodeArgs: args?.split(' ').filter(Boolean) ?? serviceNodeArgs() })
const services = { A: await start(dirA, process.env.AB_ARGS_A, 18700), B: await start(dirB, process.env.AB_ARGS_B, 18701) }
try {
  const load = await meLoader(services.A.base, { username: 'abuser', email: 'ab-user@example.com', password: 'Bench12345' })
  await load(services.A, 3)
  await load(services.B, 3)
  await abRounds(services, load, { rounds: Number(rounds), seconds: Number(seconds), unit: 'req', digits: 0 })
} finally {
  await services.A.stop()
  await services.B.stop()
  await database.drop()
}
