import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const root = fileURLToPath(new URL('../../', import.meta.url))
const readme = readFileSync(`${root}README.md`, 'utf8')

/** GitHub's anchor of a heading: lower-cased, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s-]/gu, '').replace(/\s/g, '-')

t.test('every README link resolves inside the repository (a fresh clone has nothing else)', async (t) => {
  const anchors = new Set([...readme.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) => anchor(heading)))
  const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map(([, target]) => target)
  t.ok(links.includes('docs/openapi.json'), 'the API reference links the committed document')
  for (const target of links) {
    const [file, fragment] = target.split('#')
    if (file === '') {
      t.ok(anchors.has(fragment), `${target} is a heading of the README`)
      continue
    }
    t.notMatch(file, /^([a-z]+:|\/|\.\.)/i, `${target} stays in the repository`)
    t.ok(existsSync(`${root}${file}`), `${target} exists`)
  }
})
