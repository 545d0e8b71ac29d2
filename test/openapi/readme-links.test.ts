import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const root = fileURLToPath(new URL('../../', import.meta.url))
const documents = ['README.md', 'deploy/README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]

/** GitHub's anchor of a heading: lower-cased, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s-]/gu, '').replace(/\s/g, '-')
const anchorsOf = (file: string) => new Set([...readFileSync(join(root, file), 'utf8').matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) => anchor(heading)))

t.test('the README and docs/ stay short where a newcomer starts', async (t) => {
  t.ok(readFileSync(join(root, 'README.md')).length <= 15 * 1024, 'README.md ≤ 15 KB')
  t.ok(readFileSync(join(root, 'docs/performance.md')).length <= 15 * 1024, 'docs/performance.md ≤ 15 KB')
})

for (const document of documents) {
  t.test(`every link of ${document} resolves inside the repository (a fresh clone has nothing else)`, async (t) => {
    const text = readFileSync(join(root, document), 'utf8')
    const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map(([, target]) => target).filter((target) => !/^https?:/.test(target))
    if (document === 'README.md') t.ok(links.includes('docs/openapi.json'), 'the README links the committed document')
    for (const target of links) {
      const [file, fragment] = target.split('#')
      t.notMatch(file, /^([a-z]+:|\/)/i, `${target} stays in the repository`)
      const path = file === '' ? document : normalize(join(dirname(document), file))
      t.notMatch(path, /^\.\./, `${target} stays in the repository`)
      t.ok(existsSync(join(root, path)), `${target} exists`)
      if (fragment !== undefined) t.ok(anchorsOf(path).has(fragment), `${target} is a heading of ${path}`)
    }
  })
}
