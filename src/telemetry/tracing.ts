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
  inSpan<T> (name: string, attributes: SpanAttributes, work: (span: SpanRecorder) => Promise<T>): Promise<T>
}

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
