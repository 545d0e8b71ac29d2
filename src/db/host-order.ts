/**
 * A host that failed or closed a new connection at once is tried after the others for this
 * long, and so is, behind the free ones but ahead of those, a host that refused a write.
 */
export const AVOID_MS = 5000

/**
 * The order in which a new connection tries the hosts of the URL (src/db/connector.ts), from
 * what each host did lately: failed, or refused a write.
 */
export function createHostOrder (hostCount: number, anyHost: boolean, now: () => number) {
  const avoidUntil = new Array<number>(hostCount).fill(0)
  const refusedWriteAt = new Array<number>(hostCount).fill(-Infinity)
  let cursor = 0
  // The host whose connection last served a query: new connections go there first while it is
  // free, as libpq keeps to the first writable host of the URL. Turning in round would spread
  // the writes over two servers that both take them (a stale primary started again beside the
  // new one), and a sign-up's row would be on one while its login reads the other.
  let serving: number | undefined

  return {
    /**
     * Every host once: from the serving host, or else from the next in turn; the free ones first;
     * then those that just refused a write (a new primary elsewhere is found first, yet a primary
     * read-only for a while still comes before a standby refused since, and keeps serving reads);
     * then the avoided ones, the soonest free first.
     */
    next (): number[] {
      const at = now()
      const rank = (i: number): [number, number] => avoidUntil[i] > at ? [2, avoidUntil[i]] : at - refusedWriteAt[i] < AVOID_MS ? [1, refusedWriteAt[i]] : [0, 0]
      const first = serving !== undefined && rank(serving)[0] === 0 ? serving : cursor
      const turn = avoidUntil.map((_until, i) => (first + i) % hostCount)
      // `any` takes the first host that answers, in the URL's order, as libpq does: turning would
      // spread connections, and writes, over a standby listed second. Otherwise, until a host
      // serves, each new connection starts from the next (one refused as a standby moves on).
      if (!anyHost && first === cursor) cursor = (cursor + 1) % hostCount
      // A stable sort: free hosts keep their turn.
      return turn.sort((a, b) => {
        const [rankA, sinceA] = rank(a)
        const [rankB, sinceB] = rank(b)
        return rankA - rankB || sinceA - sinceB
      })
    },
    /** How long until the first avoided host is free again; 0 or less when one is free now. */
    untilFree: (): number => Math.min(...avoidUntil) - now(),
    /** The host failed, or closed a new connection at once: tried after the others for a while. */
    avoid (index: number): void {
      avoidUntil[index] = Math.max(avoidUntil[index], now() + AVOID_MS)
      if (serving === index) serving = undefined
    },
    /** The host refused a write: tried after the free ones for a while, before the avoided. */
    refusedWrite (index: number): void {
      refusedWriteAt[index] = now()
      if (serving === index) serving = undefined
    },
    /** A connection to the host answered a query after its start: the pool uses it. */
    served (index: number): void {
      if (!anyHost) serving = index
    }
  }
}
