import { readFileSync } from 'node:fs'
import t from 'tap'
import { EnvSchema } from '../../src/config/env.js'

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')

// CONTRACT §1: .env.example lists every variable with a comment; the operator's table names each.
t.test('.env.example and docs/configuration.md name every variable the configuration reads', async (t) => {
  const variables = Object.keys(EnvSchema.properties)
  const example = new Set([...read('.env.example').matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map(([, name]) => name))
  t.strictSame(variables.filter((name) => !example.has(name)), [], 'in .env.example, as NAME= or # NAME=')
  const table = read('docs/configuration.md')
  t.strictSame(variables.filter((name) => !table.includes(`\`${name}\``)), [], 'in docs/configuration.md')
})
