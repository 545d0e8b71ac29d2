import t from 'tap'
import { AVOID_MS, createHostOrder } from '../../src/db/host-order.js'

t.test('read-write: each new connection starts from the next host until one serves; then from that one while it is free', async (t) => {
  let at = 0
  const hosts = createHostOrder(2, false, () => at)
  t.strictSame([hosts.next(), hosts.next()], [[0, 1], [1, 0]], 'in turn: a standby listed first does not take every attempt')
  hosts.served(1)
  t.strictSame([hosts.next(), hosts.next(), hosts.next()], [[1, 0], [1, 0], [1, 0]], 'the serving host first, every time (libpq keeps to its first writable host)')
  hosts.avoid(1)
  t.strictSame(hosts.next(), [0, 1], 'it failed: the others first')
  at += AVOID_MS + 1
  hosts.served(0)
  t.strictSame([hosts.next(), hosts.next()], [[0, 1], [0, 1]], 'the new serving host, even once the old one is free again')
  hosts.refusedWrite(0)
  t.strictSame(hosts.next(), [1, 0], 'it refused a write: the others first')
})

t.test('any: the URL\'s order, whichever served', async (t) => {
  const hosts = createHostOrder(2, true, () => 0)
  hosts.served(1)
  t.strictSame([hosts.next(), hosts.next()], [[0, 1], [0, 1]])
})
