import { readFileSync } from 'node:fs'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { InjectOptions, LightMyRequestCallback, LightMyRequestResponse } from 'fastify'
import { buildApp, type App } from '../../src/app.js'
import { DOCUMENT_PATH } from './document.js'

type Json = Record<string, any>

/** The committed document (docs/openapi.json): what clients, gateways and generators read. */
const document: Json = JSON.parse(readFileSync(DOCUMENT_PATH, 'utf8'))

// OpenAPI 3.1 schemas are JSON Schema 2020-12 plus OpenAPI's own annotation keywords. The
// components become one schema of their own, so `#/components/schemas/X` points into it.
const COMPONENTS = 'urn:openapi:components'
const ajv = new Ajv2020({ allErrors: true, strict: true })
ajv.addVocabulary(['example', 'discriminator', 'xml', 'externalDocs'])
addFormats.default(ajv)
const local = (schema: unknown) => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS}#/$defs/`))
ajv.addSchema({ $id: COMPONENTS, $defs: local(document.components.schemas) })

// Compiled once, up front: compiling during a test's first requests would slow exactly the
// requests that tests time (the hashing queue's 2 s, for one).
const validators = new Map<unknown, ValidateFunction>()
for (const operations of Object.values<Json>(document.paths)) {
  for (const operation of Object.values<Json>(operations)) {
    for (const answer of Object.values<Json>(operation.responses)) {
      for (const header of Object.values<Json>(answer.headers ?? {})) validators.set(header.schema, ajv.compile(local(header.schema)))
      const media = answer.content?.['application/json']
      if (media) validators.set(media.schema, ajv.compile(local(media.schema)))
    }
  }
}
const validator = (schema: unknown): ValidateFunction => validators.get(schema)!

export interface Answer {
  readonly method: string
  readonly url: string
  readonly statusCode: number
  readonly headers: Record<string, unknown>
  readonly body: string
}

/**
 * Why `answer` does not match the document, or undefined when it does: its status must be one the
 * operation declares, every header declared for it must be present and match its schema, and a
 * JSON body must match the declared schema. Paths and methods the document does not list (unknown
 * paths, HEAD, CORS preflights) are not its business.
 */
export function conformanceProblem (answer: Answer): string | undefined {
  const path = answer.url.split('?')[0]
  const operation = document.paths[path]?.[answer.method.toLowerCase()]
  if (!operation) return undefined
  const where = `${answer.method} ${path} answered ${answer.statusCode}`
  const declared = operation.responses[String(answer.statusCode)]
  if (!declared) return `${where}, a status the document does not declare (it has ${Object.keys(operation.responses).join(', ')})`
  for (const [name, header] of Object.entries<Json>(declared.headers ?? {})) {
    const value = answer.headers[name.toLowerCase()]
    if (value === undefined) return `${where} without its declared header ${name}`
    const validate = validator(header.schema)
    if (!validate(header.schema.type === 'integer' ? Number(value) : value)) return `${where} with header ${name}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`
  }
  const media = declared.content?.['application/json']
  if (!media) return undefined
  if (!String(answer.headers['content-type']).startsWith('application/json')) return `${where} with content-type ${answer.headers['content-type']}, not JSON`
  let body: unknown
  try {
    body = JSON.parse(answer.body)
  } catch {
    return `${where} with a body that is not JSON: ${answer.body.slice(0, 200)}`
  }
  const validate = validator(media.schema)
  if (!validate(body)) return `${where} with a body the document does not allow: ${ajv.errorsText(validate.errors)}; body ${answer.body.slice(0, 300)}`
  return undefined
}

/**
 * Checks every `app.inject` answer against the committed document, so no route test can pass
 * while the service says something the document does not: the call rejects with the mismatch.
 */
export function checkAnswersAgainstDocument (app: App): void {
  const inject = app.inject.bind(app) as (options?: InjectOptions | string, callback?: LightMyRequestCallback) => unknown
  const checked = async (options: InjectOptions | string): Promise<LightMyRequestResponse> => {
    const response = await (inject(options) as Promise<LightMyRequestResponse>)
    const { method = 'GET', url = '/' } = response.raw.req
    const problem = conformanceProblem({ method, url, statusCode: response.statusCode, headers: response.headers, body: response.body })
    if (problem) throw new Error(`OpenAPI conformance: ${problem}`)
    return response
  }
  // The chained form (`inject()`) and the callback form are left as they are.
  app.inject = ((options?: InjectOptions | string, callback?: LightMyRequestCallback) =>
    options === undefined || callback !== undefined ? inject(options, callback) : checked(options)) as App['inject']
}

/** `buildApp` for tests that build their own app (a database, Redis or logger of their own): its answers are checked the same way. */
export async function buildCheckedApp (...args: Parameters<typeof buildApp>): Promise<App> {
  const app = await buildApp(...args)
  checkAnswersAgainstDocument(app)
  return app
}
