import { readFileSync } from 'node:fs'
import semver from 'semver'
import t from 'tap'

// Dependencies move under us: a minor release of a library may stop supporting the Node the
// service runs on (OpenTelemetry's SDK 3 asks for Node 22.15). npm only warns (EBADENGINE), and
// a warning among many is missed; this reads what package-lock.json records of every package
// the service runs with (devDependencies aside) and names any that does not say it runs on
// every Node our `engines` admits.

const ours = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const lock = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'))

// Declare Node 22 yet use nothing Node 20 lacks: the suite covers them (light-my-request's
// `inject` in nearly every test, @fastify/static through /docs in test/management/), and the
// README says why npm warns about them.
const ACCEPTED = new Set(['content-disposition@3.0.0', 'cookie@2.0.2'])

t.test('every package the service runs with supports the Node versions package.json admits', async (t) => {
  const range = ours.engines.node as string
  const lowest = semver.minVersion(range)!.version
  // The lowest of each major the range admits, and the newest major's first release.
  const versions = [lowest, '22.0.0', '24.0.0'].filter((version) => semver.satisfies(version, range))
  t.strictSame(versions, ['20.11.0', '22.0.0', '24.0.0'], 'Node 20, 22 and 24, as the stack says')
  const refusing: string[] = []
  for (const [path, entry] of Object.entries(lock.packages as Record<string, { version?: string, dev?: boolean, engines?: { node?: string } }>)) {
    const node = entry.engines?.node
    if (path === '' || entry.dev === true || node === undefined) continue
    const name = `${path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${entry.version}`
    const missing = versions.filter((version) => !semver.satisfies(version, node))
    if (missing.length > 0 && !ACCEPTED.has(name)) refusing.push(`${name} (node ${node}: not ${missing.join(', ')})`)
  }
  t.strictSame(refusing, [], 'no package the service loads excludes a Node version we admit')
})
