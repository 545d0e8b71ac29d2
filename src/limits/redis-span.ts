import { inSpan, tracing } from '../telemetry/tracing.js'

/** One call of the limits to Redis in a span of its own: the operation's name, never its keys. */
export function inRedisSpan<T> (operation: string, run: () => Promise<T>): Promise<T> {
  if (!tracing()) return run()
  return inSpan(`redis ${operation}`, { 'db.system': 'redis', 'db.operation': operation }, run)
}
