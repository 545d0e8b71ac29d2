import t from 'tap'
import argon2 from 'argon2'
import { argon2Options, createPasswordManager, dummyHashOf, passwordBytes } from '../../src/users/password-manager.js'

const cost = { memoryCost: 1024, timeCost: 2, parallelism: 1 }
/** A stored hash without its salt and digest: algorithm, version and cost. */
const header = (hash: string) => hash.split('$').slice(0, 4).join('$')

t.test('the dummy hash has a real hash\'s algorithm, version, cost and field sizes, and matches nothing', async (t) => {
  const real = await argon2.hash('Secreto123', argon2Options(cost))
  const dummy = dummyHashOf(cost)
  t.equal(header(dummy), header(real))
  t.strictSame(dummy.split('$').slice(4).map((field) => field.length), real.split('$').slice(4).map((field) => field.length), 'salt and digest as long as argon2 makes them')
  t.not(dummyHashOf(cost), dummy, 'random each time')
  t.equal(await argon2.verify(dummy, 'Secreto123'), false)
  t.equal(await argon2.verify(dummy, ''), false)
})

t.test('each hash has a salt of its own, of the length argon2 makes, and verifies', async (t) => {
  const { hash } = createPasswordManager({ cost, concurrency: 1 })
  const [first, second] = [await hash('Secreto123'), await hash('Secreto123')]
  const salt = (stored: string) => stored.split('$')[4]
  t.not(salt(first), salt(second))
  t.equal(Buffer.from(salt(first), 'base64').length, 16)
  t.equal(header(first), header(await argon2.hash('Secreto123', argon2Options(cost))))
  t.equal(await argon2.verify(first, 'Secreto123'), true)
  t.equal(await argon2.verify(second, 'Secreto124'), false)
})

// CONTRACT §3: passwords compared exactly as received. UTF-8 has no bytes for an unpaired
// surrogate, which a JSON string may hold: each would hash as U+FFFD.
t.test('passwords that differ only in an unpaired surrogate are different passwords; well-formed ones hash as their UTF-8', async (t) => {
  const { hash, checkLogin } = createPasswordManager({ cost, concurrency: 1 })
  const stored = await hash('Aa1xxxx\ud800')
  const account = { passwordHash: stored }
  const check = async (password: string) => (await checkLogin(password, async () => account as never)).valid
  t.strictSame(await Promise.all(['Aa1xxxx\ud800', 'Aa1xxxx\ud801', 'Aa1xxxx\ufffd', 'Aa1xxxx\udc00', 'Aa1xxxx'].map(check)), [true, false, false, false, false])
  t.strictSame(passwordBytes('a\ud800b\udfff'), Buffer.from([0x61, 0xed, 0xa0, 0x80, 0x62, 0xed, 0xbf, 0xbf]), 'WTF-8: the code unit in UTF-8\'s three-byte pattern')
  t.equal(passwordBytes('Ñandú123😀'), 'Ñandú123😀', 'a well-formed password, surrogate pair included, is hashed as before')
  const earlier = await argon2.hash('Ñandú123😀', argon2Options(cost))
  t.equal((await checkLogin('Ñandú123😀', async () => ({ passwordHash: earlier }) as never)).valid, true, 'a hash argon2 made of the string still verifies')
})

// Hashed before passwordBytes, such a password's stored hash is of U+FFFD in place of the surrogate.
t.test('a hash of a password with an unpaired surrogate made before still logs in, and asks to be re-hashed', async (t) => {
  const { checkLogin } = createPasswordManager({ cost, concurrency: 1 })
  const earlier = { passwordHash: await argon2.hash('Aa1xxxx\ufffd', argon2Options(cost)) }
  const outcome = await checkLogin('Aa1xxxx\ud800', async () => earlier as never)
  t.strictSame([outcome.valid, outcome.needsRehash], [true, true])
  const wrong = await checkLogin('Bb2yyyy\ud800', async () => earlier as never)
  t.strictSame([wrong.valid, wrong.needsRehash], [false, false])
})

// CONTRACT §3: an unknown e-mail is checked against a dummy hash "so timing does not reveal which
// e-mails exist". A stored hash of a weaker cost (made before the cost was raised) verifies faster
// than that dummy: a failed check against it pays a verify at the configured cost too, alongside.
t.test('a login against a hash weaker than the configured cost takes a configured-cost verify too; one at the cost, only its own', async (t) => {
  const weaker = await argon2.hash('Secreto123', argon2Options({ ...cost, timeCost: 1 }))
  const current = await argon2.hash('Secreto123', argon2Options(cost))
  const verifies = async (passwordHash: string | undefined, password: string) => {
    const timings: string[] = []
    const manager = createPasswordManager({ cost, concurrency: 2, onTiming: (operation) => timings.push(operation) })
    const outcome = await manager.checkLogin(password, async () => passwordHash === undefined ? undefined : { passwordHash })
    return { valid: outcome.valid, needsRehash: outcome.needsRehash, verifies: timings.length }
  }
  t.strictSame(await verifies(weaker, 'Wrong12345'), { valid: false, needsRehash: false, verifies: 2 }, 'weaker, wrong password: its own verify and one at the configured cost')
  t.strictSame(await verifies(weaker, 'Secreto123'), { valid: true, needsRehash: true, verifies: 2 }, 'weaker, right password: the same time, then re-hashed')
  t.strictSame(await verifies(current, 'Wrong12345'), { valid: false, needsRehash: false, verifies: 1 }, 'at the cost: one verify')
  t.strictSame(await verifies(current, 'Secreto123'), { valid: true, needsRehash: false, verifies: 1 })
  t.strictSame(await verifies(undefined, 'Wrong12345'), { valid: false, needsRehash: false, verifies: 1 }, 'unknown e-mail: the dummy, at the cost')
})
