/**
 * What the service's own code knows of tracing: a span around a piece of work, and nothing else.
 * OpenTelemetry lives in ./otel.ts, loaded only when tracing is on; until it installs its tracer
 * here, `inSpan` is a direct call, so with tracing off no OpenTelemetry module is ever loaded.
 */

/** Attribute values a span may carry: names, counts and durations, never user data. */
export type SpanAttributes = Record<string, string | number | boolean>

export interface SpanRecorder {
  setAttributes (attributes: SpanAttributes): void
}

export interface SpanTracer {
  /**
   * Runs `work` in a child span of the active one, ended when it settles. A failure sets the
   * span's status and `error.type` (the error's class or SQLSTATE), never its message.
   */
  inSpan<T> (name: string, attributes: SpanAttributes, work: (span: SpanRecorder) => Promise<T>, kind?: SpanKindName): Promise<T>
}

/** `client`: a call to another server (the database, Redis), as OpenTelemetry's conventions name it. */
type SpanKindName = 'internal' | 'client'

const NO_SPAN: SpanRecorder = { setAttributes () {} }
let tracer: SpanTracer | undefined

/** Installed once at start by ./otel.ts; `undefined` turns spans back into plain calls (tests). */
export function installTracer (installed: SpanTracer | undefined): void {
  tracer = installed
}

export function inSpan<T> (name: string, attributes: SpanAttributes, work: (span: SpanRecorder) => Promise<T>): Promise<T> {
  return tracer === undefined ? work(NO_SPAN) : tracer.inSpan(name, attributes, work)
}

/** Whether spans are being made: callers skip preparing attributes otherwise. */
export function tracing (): boolean {
  return tracer !== undefined
}

/**
 * One database statement in a span of its own (postgres.js has no instrumentation):
 * `SELECT users_by_email`, its name and operation, never its text or parameters.
 */
export function inStatementSpan<T> (operation: string, name: string, run: () => Promise<T>, batchSize?: number): Promise<T> {
  if (tracer === undefined) return run()
  const attributes: SpanAttributes = { 'db.system': 'postgresql', 'db.operation': operation, 'db.statement.name': name }
  if (batchSize !== undefined) attributes['db.operation.batch.size'] = batchSize
  return tracer.inSpan(`${operation} ${name}`, attributes, run, 'client')
}

/** One call of the abuse limits to Redis in a span of its own: `redis login_take`, never its keys. */
export function inRedisSpan<T> (operation: string, run: () => Promise<T>): Promise<T> {
  if (tracer === undefined) return run()
  return tracer.inSpan(`redis ${operation}`, { 'db.system': 'redis', 'db.operation': operation }, run, 'client')
}
