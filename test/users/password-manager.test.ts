import t from 'tap'
import argon2 from 'argon2'
import { argon2Options, createPasswordManager, dummyHashOf } from '../../src/users/password-manager.js'

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
