import { inSpan, tracing } from '../telemetry/tracing.js'

export type StatementOperation = 'SELECT' | 'INSERT' | 'UPDATE' | 'COPY'

/**
 * One database statement in a span of its own (postgres.js has no instrumentation): its name and
 * operation, never its text or parameters. `SELECT users_by_email`, say.
 */
export function inStatementSpan<T> (name: string, operation: StatementOperation, run: () => Promise<T>, extra: Record<string, number> = {}): Promise<T> {
  if (!tracing()) return run()
  return inSpan(`${operation} ${name}`, { 'db.system': 'postgresql', 'db.operation': operation, 'db.statement.name': name, ...extra }, run)
}
