import t from 'tap'
import { createArrivalQueue, type SweepVerdict } from '../../src/http/arrival-queue.js'

interface Item { name: string }

/** Sweeps up to `arrivedBy`, answering each item from `verdicts` (default 'drop'); returns the names visited. */
function sweepNames (queue: ReturnType<typeof createArrivalQueue<Item>>, arrivedBy: number, verdicts: Record<string, SweepVerdict> = {}): string[] {
  const visited: string[] = []
  queue.sweep(arrivedBy, (item) => {
    visited.push(item.name)
    return verdicts[item.name] ?? 'drop'
  })
  return visited
}

t.test('a sweep visits what arrived by its bound, oldest first; kept items come back, dropped ones do not', async (t) => {
  const queue = createArrivalQueue<Item>()
  queue.add({ name: 'a' }, 10)
  queue.add({ name: 'b' }, 20)
  queue.add({ name: 'c' }, 30)
  queue.add({ name: 'd' }, 40)
  t.strictSame(sweepNames(queue, 5), [])
  t.strictSame(sweepNames(queue, 30, { b: 'keep' }), ['a', 'b', 'c'])
  t.strictSame(sweepNames(queue, 30), ['b'])
  t.strictSame(sweepNames(queue, 100), ['d'])
  t.strictSame(sweepNames(queue, 100), [])
})

t.test('remove takes an item out wherever it waits; an unknown or spent number changes nothing', async (t) => {
  const queue = createArrivalQueue<Item>()
  const a = queue.add({ name: 'a' }, 10)
  const b = queue.add({ name: 'b' }, 20)
  queue.add({ name: 'c' }, 30)
  queue.remove(b)
  queue.remove(b)
  queue.remove(a)
  queue.remove(99)
  queue.remove(-1)
  t.strictSame(sweepNames(queue, 100), ['c'])
  const d = queue.add({ name: 'd' }, 40)
  queue.remove(a)
  t.strictSame(sweepNames(queue, 100, { d: 'keep' }), ['d'])
  queue.remove(d)
  t.strictSame(sweepNames(queue, 100), [])
})

t.test('past its first 64 slots the queue grows, keeping order and every number', async (t) => {
  const queue = createArrivalQueue<Item>()
  const numbers = Array.from({ length: 300 }, (_, i) => queue.add({ name: String(i) }, i))
  // Every third one answered early, the oldest among them, so the ring's start moves as it grows.
  for (let i = 0; i < 300; i += 3) queue.remove(numbers[i])
  const expected = Array.from({ length: 300 }, (_, i) => String(i)).filter((_, i) => i % 3 !== 0)
  t.strictSame(sweepNames(queue, 1000, Object.fromEntries(expected.map((name) => [name, 'keep']))), expected)
  // Interleaved with a second round of arrivals that wraps around the grown ring.
  for (let i = 300; i < 600; i++) queue.add({ name: String(i) }, i)
  t.strictSame(sweepNames(queue, 449).length, expected.length + 150)
  t.strictSame(sweepNames(queue, 1000), Array.from({ length: 150 }, (_, i) => String(450 + i)))
})
