/** What `sweep`'s visitor says of an item: leave the queue, or stay for the next sweep. */
export type SweepVerdict = 'drop' | 'keep'

/**
 * Items in the order they arrived, each with its arrival time, for a periodic sweep from the
 * oldest; an item leaves early by the number `add` gave it. A ring of slots, each cleared when
 * its item leaves, growing when full.
 *
 * Not a Map: under a set and a delete per request, V8 rebuilds a Map's table every few dozen
 * entries; once the table is in the old generation each new one is made there too, and the
 * discarded one still points at the entries it held (OrderedHashTable::Rehash). A
 * young-generation collection counts every old object's pointers as live, dead object or not,
 * so each request's objects would outlive it until the next full collection, which pauses the
 * process: in this ring a finished request's slot is cleared, and nothing keeps it alive.
 */
export function createArrivalQueue<T extends object> () {
  // A power of two, so a sequence number's slot is its low bits.
  let mask = 63
  let items: Array<T | undefined> = new Array(mask + 1).fill(undefined)
  let times = new Float64Array(mask + 1)
  // Sequence numbers: `head` is the oldest slot still in the ring, `tail` the next one given.
  let head = 0
  let tail = 0

  function grow (): void {
    const larger = mask * 2 + 1
    const largerItems: Array<T | undefined> = new Array(larger + 1).fill(undefined)
    const largerTimes = new Float64Array(larger + 1)
    for (let seq = head; seq < tail; seq++) {
      largerItems[seq & larger] = items[seq & mask]
      largerTimes[seq & larger] = times[seq & mask]
    }
    mask = larger
    items = largerItems
    times = largerTimes
  }

  /** Moves `head` past the slots already cleared, so the ring spans only what still waits. */
  function advance (): void {
    while (head < tail && items[head & mask] === undefined) head++
  }

  return {
    /** Queues `item`, arrived at `at` (ms); returns the number `remove` takes. */
    add (item: T, at: number): number {
      if (tail - head > mask) grow()
      items[tail & mask] = item
      times[tail & mask] = at
      return tail++
    },

    /** Takes the item numbered `seq` out of the queue. */
    remove (seq: number): void {
      if (seq < head || seq >= tail) return
      items[seq & mask] = undefined
      if (seq === head) advance()
    },

    /**
     * Visits the items that arrived at or before `arrivedBy`, oldest first; `visit` says of
     * each whether it leaves the queue or stays for the next sweep.
     */
    sweep (arrivedBy: number, visit: (item: T) => SweepVerdict): void {
      for (let seq = head; seq < tail; seq++) {
        const item = items[seq & mask]
        if (item === undefined) continue
        if (times[seq & mask] > arrivedBy) break
        if (visit(item) === 'drop') items[seq & mask] = undefined
      }
      advance()
    }
  }
}
