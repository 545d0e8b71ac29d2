// Resolve hook of module-log.mjs: every URL an import resolves to goes back to the main thread.
let port
export function initialize (data) { port = data.port }
export async function resolve (specifier, context, next) {
  const resolved = await next(specifier, context)
  port.postMessage(resolved.url)
  return resolved
}
