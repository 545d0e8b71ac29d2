/** Where the lines go: process.stdout in the service, a spy in tests. */
export interface LineSink {
  write (text: string): unknown
}

/**
 * A pino destination that writes the lines of one event-loop turn in a single call instead of
 * one each. Pino's default stdout destination makes one synchronous write(2) per line, which
 * the benchmark's profile of GET /users/me showed as the largest single cost (11% of the CPU:
 * bench/BENCHMARKS.md). Lines keep their order, leave within the same turn (setImmediate), and
 * are flushed synchronously on exit, so a crash that ends in process.exit loses none of them.
 */
export function createBatchedLineStream (sink: LineSink = process.stdout) {
  let pending = ''
  let scheduled = false
  const flush = (): void => {
    scheduled = false
    if (pending === '') return
    const text = pending
    pending = ''
    sink.write(text)
  }
  process.on('exit', flush)
  return {
    write (line: string): void {
      pending += line
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush
  }
}

let shared: ReturnType<typeof createBatchedLineStream> | undefined
/** The service's one batched stdout (one exit hook, however many loggers ask for it). */
export function batchedStdout () {
  shared ??= createBatchedLineStream(process.stdout)
  return shared
}
