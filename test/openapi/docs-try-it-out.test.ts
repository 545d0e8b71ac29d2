import { accessSync, constants } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { chromium, type Page } from 'playwright-core'
import { buildManagementApp } from '../../src/management/management-app.js'
import { eq } from 'drizzle-orm'
import { users } from '../../src/db/schema.js'
import { assertLoggedIn, build, uniqueUser } from '../helper.js'
import { freePort } from '../server-process.js'

const CHROMIUM = '/usr/bin/chromium'
const installed = (() => {
  try {
    accessSync(CHROMIUM, constants.X_OK)
    return true
  } catch {
    return false
  }
})()

/**
 * Opens an operation, presses "Try it out", optionally types the body, executes, and reads the
 * live answer: its status and body, or the page's error (e.g. "Failed to fetch") as the body.
 */
async function tryItOut (page: Page, operationId: string, tag: string, body?: unknown): Promise<{ status: string, body: string }> {
  const operation = page.locator(`#operations-${tag}-${operationId}`)
  await operation.locator('.opblock-summary').first().click()
  await operation.locator('button.try-out__btn').click()
  if (body !== undefined) await operation.locator('textarea.body-param__text').fill(JSON.stringify(body))
  await operation.locator('button.execute').click()
  const answer = operation.locator('.live-responses-table .response').first()
  const status = (await answer.locator('.response-col_status').innerText()).trim()
  const shown = answer.locator('.highlight-code pre, pre.microlight')
  const text = await shown.count() > 0 ? await shown.first().innerText() : await answer.locator('.response-col_description').innerText()
  return { status, body: text }
}

t.test('"Try it out" on /docs reaches the API in the development profile: sign-up, login and /users/me', {
  skip: installed ? false : `${CHROMIUM} is not installed (apt-get install -y chromium): the /docs "Try it out" check is skipped`
}, async (t) => {
  // The development defaults, only with ports of this test: the document's server is the API
  // listener, and the API allows the management listener's origin (the docs page's).
  const [port, managementPort] = [await freePort(), await freePort()]
  const api = await build(t, 'pglite', { env: { PORT: String(port), MANAGEMENT_PORT: String(managementPort) } })
  const management = await buildManagementApp({ api, isShuttingDown: () => false })
  t.teardown(() => management.close())
  await api.listen({ port, host: '127.0.0.1' })
  await management.listen({ port: managementPort, host: '127.0.0.1' })

  const profile = await mkdtemp(join(tmpdir(), 'ums-chromium-'))
  t.teardown(() => rm(profile, { recursive: true, force: true }))
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  page.setDefaultTimeout(30_000)
  await page.goto(`http://127.0.0.1:${managementPort}/docs`)

  const account = uniqueUser('docs')
  const signUp = await tryItOut(page, 'signUp', 'auth', account)
  t.equal(signUp.status, '201', signUp.body)
  const [{ id }] = await api.database.db.select({ id: users.id }).from(users).where(eq(users.email, account.email))
  const stored = { id, username: account.username, email: account.email }
  t.strictSame(JSON.parse(signUp.body), stored, 'the id the database gave the account')

  const logIn = await tryItOut(page, 'logIn', 'auth', { email: account.email, password: account.password })
  const token = assertLoggedIn(t, { status: Number(logIn.status), json: () => JSON.parse(logIn.body) }, stored, 'logged in through the page')

  // The page's own "Authorize" dialog, as a user would fill it.
  await page.locator('button.authorize').first().click()
  await page.locator('.modal-ux input').first().fill(token)
  await page.locator('.modal-ux button.authorize').click()
  await page.locator('.modal-ux button.btn-done').click()

  const me = await tryItOut(page, 'getOwnRecord', 'users')
  t.equal(me.status, '200', me.body)
  t.strictSame(JSON.parse(me.body), { ...stored, role: 'ROLE_USER' })
})
