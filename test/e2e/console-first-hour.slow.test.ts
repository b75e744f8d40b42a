import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { build, childEnv, KEY_A, settled, testConfig } from '../helper.js'

// Both consoles as a new operator first sees them, on a gateway configured as the shipped and
// `init` configs are: the balance plugin off, CORS with its defaults. Spend is not charged to
// any balance there, and the pages must say so instead of showing "spent $0" beside a spend;
// CORS's `credentials: false` is a switch, not a secret; no page asks for anything that is not
// there (its icon included).

const CHROMIUM = '/usr/bin/chromium'
const ADMIN = 'first-hour-admin-token-0123456789abcdef'

t.test('with no admin token, the page says how to set one: a variable needs a restart, the file a reload', async (t) => {
  const app = await build(t)
  const res = await app.inject({ url: '/console/admin' })
  t.equal(res.statusCode, 404)
  t.match(res.body, /The admin API is off/)
  t.match(res.body, /environment variable[^<]*\(the shipped config: <code>token: \$\{MODELGATE_ADMIN_TOKEN:-\}<\/code>\), then <strong>restart<\/strong>/)
  t.match(res.body, /a reload reads the config file again, not the environment/)
  t.match(res.body, /written in the config file itself[^<]*, then reload it/)
})

t.test('/favicon.ico and the consoles\' icon answer', async (t) => {
  if (!existsSync(fromRoot('dist', 'console', 'favicon.svg'))) execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })
  const app = await build(t)
  for (const url of ['/favicon.ico', '/console/favicon.svg']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, url)
    t.match(res.headers['content-type'], /^image\/svg\+xml/, url)
    t.match(res.body, /^<svg /, url)
  }
})

if (!existsSync(CHROMIUM)) {
  t.test('the console in a browser', { skip: 'Chromium is not installed at /usr/bin/chromium (.ci/run installs it)' }, async () => {})
} else {
  if (!existsSync(fromRoot('dist', 'console', 'favicon.svg'))) execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })

  let app: FastifyInstance
  let off: FastifyInstance
  let base: string
  let offBase: string
  let browser: Browser

  const listen = async (a: FastifyInstance): Promise<string> => {
    await a.listen({ host: '127.0.0.1', port: 0 })
    return `http://127.0.0.1:${(a.server.address() as { port: number }).port}`
  }

  t.before(async () => {
    // the shipped chain without the balance plugin (as config/gateway.yaml and init's have it)
    app = await buildApp(testConfig({ admin: { token: ADMIN }, plugins: [{ name: 'cors' }, { name: 'auth' }, { name: 'quota' }, { name: 'usage' }] }))
    base = await listen(app)
    off = await buildApp(testConfig())
    offBase = await listen(off)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
    // a paid call
    const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'demo/gpt', messages: [{ role: 'user', content: 'a paid call' }] }) })
    await res.text()
    await settled()
    await app.gateway.store.flush()
  })
  t.teardown(async () => { await browser?.close(); await app?.close(); await off?.close() })

  /** A page that records every answer of 400 or more to what it asked for, but the document itself. */
  const watched = async (): Promise<{ page: Page, failed: string[] }> => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    const failed: string[] = []
    page.on('response', (r) => { if (r.status() >= 400 && r.request().resourceType() !== 'document') failed.push(`${r.status()} ${r.url()}`) })
    page.on('requestfailed', (r) => { failed.push(`failed ${r.url()}`) })
    return { page, failed }
  }

  t.test('the developer console: a project that made a paid call sees its spend, and that no balance is charged', async (t) => {
    const { page, failed } = await watched()
    await page.goto(`${base}/console/#usage`)
    await page.fill('#apikey', KEY_A)
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#calls tbody tr td')
    const stats = await page.textContent('#stats') ?? ''
    t.match(stats, /\$0\.0000\d+\s*Spend/, 'the spend of the call')
    t.match(stats, /not charged\s*Balance/, 'the balance: not charged, not a figure')
    t.match(await page.textContent('#balance-off'), /not charged to a prepaid balance on this gateway \(its balance plugin is off\)/)
    t.notMatch(await page.textContent('#quota'), /spent \$0/, 'no "spent $0" beside the spend')
    t.same(failed, [], 'nothing the page asked for failed (its icon included)')
    await page.close()
  })

  t.test('the operator\'s console: the tenants say balances are not charged; the plugins show credentials: false', async (t) => {
    const { page, failed } = await watched()
    await page.goto(`${base}/console/admin`)
    await page.fill('#token', ADMIN)
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#view-overview:not([hidden])')
    await page.click('#tab-tenants')
    await page.waitForSelector('#orgs tr[data-org="acme"]')
    await page.waitForSelector('#tn-balance-off:not([hidden])')
    t.match(await page.textContent('#tn-balance-off'), /balance.* plugin is off/)
    const cells = await page.$$eval('#orgs tr[data-org="acme"] td', (tds) => tds.map((td) => td.textContent))
    t.equal(cells[2], 'not charged', 'Spent says not charged, not $0')
    t.not(cells[5], '$0', 'while Spend (30 d) shows what the calls cost')

    await page.click('#tab-plugins')
    await page.waitForSelector('#plugins tr[data-plugin="cors"]')
    const cors = await page.textContent('#plugins tr[data-plugin="cors"]') ?? ''
    t.match(cors, /"credentials": false/)
    t.notMatch(cors, /••••••/)
    t.same(failed, [], 'nothing the page asked for failed (its icon included)')
    await page.close()
  })

  t.test('with the balance plugin on, the developer console shows the balance as before', async (t) => {
    const on = await buildApp(testConfig({ plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] }))
    t.teardown(async () => { await on.close() })
    const me = await on.inject({ url: '/console/api/me', headers: { authorization: `Bearer ${KEY_A}` } })
    t.match(me.json(), { balance_charged: true, balance_usd: '25' })
    t.match((await app.inject({ url: '/console/api/me', headers: { authorization: `Bearer ${KEY_A}` } })).json(), { balance_charged: false })
  })

  t.test('the admin-off page asks for nothing that is not there', async (t) => {
    const { page, failed } = await watched()
    await page.goto(`${offBase}/console/admin`)
    await page.waitForSelector('h1')
    t.match(await page.textContent('h1'), /The admin API is off/)
    t.same(failed, [])
    await page.close()
  })
}
