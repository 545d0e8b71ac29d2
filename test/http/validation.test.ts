import t from 'tap'
import { compileBodyValidator } from '../../src/http/validation.js'
import { isEmail } from '../../src/schemas/user-rules.js'
import { SignupBody } from '../../src/schemas/users.js'

t.test('the e-mail check: the length cap first, then a linear pattern', async (t) => {
  for (const ok of ['ana@example.com', 'a.b+c@sub.example.co', 'x@y.io']) t.ok(isEmail(ok), ok)
  for (const bad of ['a@b', 'x@localhost', 'a@@b.com', '.a@b.com', 'a@-b.com', `${'a'.repeat(250)}@b.com`]) t.notOk(isEmail(bad), bad)
  const started = Date.now()
  // Under the 254-character cap, so that the pattern itself is what is timed.
  t.notOk(isEmail(`${'a.'.repeat(60)}@${'b-'.repeat(60)}`), 'a pathological address')
  // A backtracking pattern takes minutes on this input (exponential in its length); a linear one, microseconds.
  t.ok(Date.now() - started < 1000, 'answered without backtracking')
})

t.test('the sign-up validator as Fastify compiles it: our keywords, all errors, no coercion', async (t) => {
  const validate = compileBodyValidator(SignupBody)
  t.ok(validate({ username: 'ana', email: 'ana@example.com', password: 'Secreto123' }))
  t.ok(validate({ username: 'e\u0301'.repeat(20), email: 'ana@example.com', password: 'Secreto123' }), '20 code points in NFC, 40 as typed')
  t.notOk(validate({ username: ' ana', email: 'ana@example.com', password: 'Secreto123' }))
  t.strictSame((validate.errors as Array<{ keyword: string }>).map((e) => e.keyword), ['x-no-outer-space'])
  t.notOk(validate({ username: 'ab', email: 42, password: 12345678 }))
  t.strictSame((validate.errors as Array<{ instancePath: string, keyword: string }>).map((e) => `${e.instancePath} ${e.keyword}`).sort(),
    ['/email type', '/password type', '/username x-nfc-length'], 'one entry per field, a number is not a string')
})
