// Login timing: an unknown e-mail must cost what a wrong password costs (CONTRACT §3),
// so response times do not reveal which e-mails are registered.
// Usage: npm run build && node bench/login-timing.js [rounds]
import { performance } from 'node:perf_hooks'
import { createDatabase, median, postJson, startService } from './lib.js'

const rounds = Number(process.argv[2] ?? 300)
const database = await createDatabase()
const service = await startService({ databaseUrl: database.url })
try {
  const account = { username: 'timing', email: 'timing@example.com', password: 'Secreto123' }
  const created = await postJson(service.base, '/auth/signup', account)
  if (created.status !== 201) throw new Error(`sign-up failed: ${created.status}`)

  const time = async (body) => {
    const start = performance.now()
    const { status } = await postJson(service.base, '/auth/login', body)
    if (status !== 401) throw new Error(`expected 401, got ${status}`)
    return performance.now() - start
  }
  // Warm-up, then alternate the two cases so drift on a noisy machine hits both alike.
  for (let i = 0; i < 20; i++) await time({ email: account.email, password: 'Wrong12345' })
  const wrongPassword = []
  const unknownEmail = []
  for (let i = 0; i < rounds; i++) {
    wrongPassword.push(await time({ email: account.email, password: `Wrong${i}abcD` }))
    unknownEmail.push(await time({ email: `nobody${i}@example.com`, password: `Wrong${i}abcD` }))
  }
  const result = {
    rounds,
    wrongPasswordMedianMs: +median(wrongPassword).toFixed(2),
    unknownEmailMedianMs: +median(unknownEmail).toFixed(2),
    ratio: +(median(unknownEmail) / median(wrongPassword)).toFixed(3)
  }
  console.table([result])
  console.log(Math.abs(result.ratio - 1) <= 0.1 ? 'PASS: within ±10%' : 'FAIL: outside ±10%')
} finally {
  await service.stop()
  await database.drop()
}
