import t, { type Test } from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { budgetScope, projectRule, quotaWindow } from '../../engine/gateway/quota-windows.js'
import { fromRoot } from '../../paths.js'
import { childEnv, KEY_A, testConfig } from '../helper.js'
import { usageRow } from '../usage-row.js'

// Both consoles in headless Chromium (Debian's /usr/bin/chromium via playwright-core), at desktop
// and phone widths, on what they show of figures and states: an amount whole and on one line in
// its tile, however long; charts tall enough to read, with labels of 12 px at least; a key over
// its budget said so; refused calls in the request log, found by their status, and every kind of
// call in its kind filter.

const CHROMIUM = '/usr/bin/chromium'
const ADMIN = 'admin-figures-token-0123456789abcdef'
const CAPPED = 'mg-figures-capped-0123456789abcdef'
/** What the seeded calls cost in all: an amount with eight decimals. */
const SPEND = '0.04160092'

t.test('in headless Chromium', { skip: existsSync(CHROMIUM) ? false : 'Chromium is not installed at /usr/bin/chromium (.ci/run installs it)' }, async (t) => {
  if (!existsSync(fromRoot('dist', 'console', 'admin', 'index.html'))) {
    execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })
  }
  const app: FastifyInstance = await buildApp(testConfig({
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    tenants: [{ org: 'acme', balance_usd: 10, projects: [{ id: 'web', quota: { tokens: 1000, per: 'day' }, keys: [{ key: KEY_A, name: 'a' }, { key: CAPPED, name: 'capped', budget: { usd: 0.001, per: 'day' } }] }] }]
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  t.teardown(async () => { await browser.close(); await app.close() })

  // two calls of key a, costing $0.04160092 together; the capped key's budget spent for today
  const { store } = app.gateway
  const a = await store.keys.verify(KEY_A)
  const capped = await store.keys.verify(CAPPED)
  if (a === undefined || capped === undefined) throw new Error('keys not made')
  const now = Date.now()
  await store.usage.record(usageRow({ id: 'usage_figures_1', created_at: now - 120_000, key_id: a.id, model: 'demo/gpt', cost_nano: 40_000_000 }))
  await store.usage.record(usageRow({ id: 'usage_figures_2', created_at: now - 60_000, key_id: a.id, model: 'demo/gpt', cost_nano: 1_600_920 }))
  await store.quota.count(budgetScope(capped.lineage), quotaWindow('day', now).start, 0, 1_000_000, { costNano: 1_000_000 })
  // the project's quota of 1,000 tokens a day: 250 used (its meter a quarter full)
  await store.quota.count(projectRule('acme', 'web', { tokens: 1000, per: 'day' }).scope, quotaWindow('day', now).start, 250, 0, { tokens: 1000 })
  // a call the spent budget refuses: a refused record of the capped key
  const refused = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CAPPED}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo/gpt', messages: [{ role: 'user', content: 'over budget' }] })
  })
  t.equal(refused.status, 429, 'the capped key is refused')
  const trace = refused.headers.get('x-svc-trace-id') ?? ''
  const record = (await store.usage.byTrace(trace))?.row
  t.match(record, { status: 'refused', key_id: capped.id, cost_nano: 0 }, 'and its refusal is recorded')
  const code = record?.error ?? ''

  /**
   * The figure of a tile, as shown: its text, whether it sits on one line, and how far it runs
   * past its tile's content box (0: it fits).
   */
  const tile = async (page: Page, selector: string): Promise<{ text: string, lines: number, past: number, fontPx: number }> =>
    await page.$eval(selector, (v) => {
      const box = (v.parentElement as HTMLElement).getBoundingClientRect()
      const pad = parseFloat(getComputedStyle(v.parentElement as HTMLElement).paddingRight)
      const range = document.createRange()
      range.selectNodeContents(v)
      const rects = [...range.getClientRects()]
      const lines = new Set(rects.map((r) => Math.round(r.top))).size
      const right = Math.max(...rects.map((r) => r.right))
      return { text: v.textContent ?? '', lines, past: Math.max(0, right - (box.right - pad)), fontPx: parseFloat(getComputedStyle(v).fontSize) }
    })
  const wholeOnOneLine = (t: Test, got: { text: string, lines: number, past: number, fontPx: number }, want: string, where: string): void => {
    t.equal(got.text, want, `${where}: the amount exact`)
    t.equal(got.lines, 1, `${where}: on one line`)
    t.ok(got.past <= 0.5, `${where}: within its tile (${got.past.toFixed(1)} px past it)`)
    t.ok(got.fontPx >= 12, `${where}: readable (${got.fontPx.toFixed(1)} px)`)
  }

  for (const [width, height] of [[1280, 1000], [375, 800], [320, 700]] as const) {
    t.test(`the developer console at ${width} px: the spend whole, charts readable`, async (t) => {
      const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: width < 600 ? 2 : 1 })
      t.teardown(() => page.close())
      const violations: string[] = []
      await page.exposeFunction('reportViolation', (v: string) => { violations.push(v) })
      await page.addInitScript(() => { document.addEventListener('securitypolicyviolation', (e) => { void (window as unknown as { reportViolation: (v: string) => Promise<void> }).reportViolation(`${e.violatedDirective} ${e.blockedURI}`) }) })
      await page.goto(`${base}/console/#usage`)
      await page.fill('#apikey', KEY_A)
      await page.click('#signin button[type=submit]')
      await page.waitForSelector('#dashboard:not([hidden]) #stats .stat')
      const spend = page.locator('#stats .stat', { hasText: 'Spend' }).locator('.v')
      wholeOnOneLine(t, await tile(page, await spend.evaluate((e) => { e.id = 'spend-figure'; return '#spend-figure' })), `$${SPEND}`, 'the spend')
      await page.waitForSelector('#calls tbody tr td')
      t.match(await page.textContent('#calls tbody'), `refused (${code})`, 'the project\'s refused call listed with its code')
      const charts = await page.$$eval('#dashboard svg', (svgs) => svgs.map((svg) => {
        const rect = svg.getBoundingClientRect()
        const scale = rect.width / (svg as SVGSVGElement).viewBox.baseVal.width
        const sizes = [...svg.querySelectorAll('text')].map((x) => parseFloat(getComputedStyle(x).fontSize) * scale)
        return { height: rect.height, smallest: Math.min(...sizes) }
      }))
      // the project's quota meter: filled as far as the tokens used, within the page's CSP
      const meter = await page.$eval('#quota .meter', (m) => ({ now: Number(m.getAttribute('aria-valuenow')), fill: (m.querySelector('span') as HTMLElement).getBoundingClientRect().width, whole: m.getBoundingClientRect().width }))
      t.equal(meter.now, 25, 'the quota meter says 25% used')
      t.ok(Math.abs(meter.fill / meter.whole * 100 - meter.now) <= 1, `its fill is ${(meter.fill / meter.whole * 100).toFixed(1)}% of its width`)
      t.same(violations, [], 'no Content-Security-Policy violation')
      t.equal(charts.length, 3, 'three charts')
      for (const c of charts) {
        t.ok(c.height >= 200, `a chart ${Math.round(c.height)} px tall`)
        t.ok(c.smallest >= 12, `its labels ${c.smallest.toFixed(1)} px at the least`)
      }
    })
  }

  /** The operator's console, signed in with the admin token, on the section `name`. */
  const admin = async (t: Test, width: number, height: number, name: string): Promise<Page> => {
    const page = await browser.newPage({ viewport: { width, height }, deviceScaleFactor: width < 600 ? 2 : 1 })
    t.teardown(() => page.close())
    await page.goto(`${base}/console/admin`)
    await page.fill('#token', ADMIN)
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#view-overview:not([hidden])')
    if (name !== 'overview') {
      await page.click(`#tab-${name}`)
      await page.waitForSelector(`#view-${name}:not([hidden])`)
    }
    return page
  }

  for (const [width, height] of [[1280, 1000], [375, 800], [320, 700]] as const) {
    t.test(`the operator's overview at ${width} px: amounts whole and on one line`, async (t) => {
      const page = await admin(t, width, height, 'overview')
      await page.waitForSelector('#ov-totals .stat[data-stat="cost"]')
      wholeOnOneLine(t, await tile(page, '#ov-totals .stat[data-stat="cost"] .v'), `$${SPEND}`, 'the spend')
      const errors = await tile(page, '#ov-totals .stat[data-stat="errors"] .v')
      t.equal(errors.text, '1', 'the refused call counted in the errors')
    })
  }

  t.test('a key over its budget says so, not "active"', async (t) => {
    const page = await admin(t, 1280, 1000, 'keys')
    await page.waitForSelector(`#keys tr[data-key-id="${capped.id}"]`)
    const badge = async (id: string): Promise<string> => (await page.textContent(`#keys tr[data-key-id="${id}"] .badge`)) ?? ''
    t.equal(await badge(capped.id), 'over budget')
    t.equal(await page.getAttribute(`#keys tr[data-key-id="${capped.id}"] .badge`, 'class'), 'badge bad', 'in the colour of a refusal')
    t.equal(await badge(a.id), 'active', 'a key within its budget (none) is active')
  })

  t.test('the request log: every kind of call in its kind filter; refused calls shown with their code, and filtered', async (t) => {
    const page = await admin(t, 1280, 1000, 'log')
    const kinds = await page.$$eval('#lf-endpoint option', (os) => os.map((o) => (o as HTMLOptionElement).value))
    t.same(kinds, ['', 'chat.completions', 'messages', 'responses', 'generate_content', 'embeddings', 'images.generations', 'count_tokens', 'passthrough', 'mcp.tools_call'])
    t.ok((await page.$$eval('#lf-status option', (os) => os.map((o) => (o as HTMLOptionElement).value))).includes('refused'))
    await page.selectOption('#lf-status', 'refused')
    await page.click('#log-filter button[type=submit]')
    await page.waitForFunction(() => document.querySelectorAll('#log tbody tr[data-trace]').length === 1)
    const row = (await page.textContent(`#log tr[data-trace="${trace}"]`)) ?? ''
    t.match(row, 'refused')
    t.match(row, code, `with its code (${code})`)
    await page.click(`#log tr[data-trace="${trace}"] button[data-open]`)
    await page.waitForSelector('#call-dialog[open] dl')
    t.match(await page.textContent('#call-body'), new RegExp(`Refused with\\s*${code}`))
    t.match(await page.textContent('#call-body'), /refused the call before any provider/)
    await page.keyboard.press('Escape')
    await page.selectOption('#lf-status', 'ok')
    await page.click('#log-filter button[type=submit]')
    await page.waitForFunction(() => document.querySelectorAll('#log tbody tr[data-trace]').length === 2)
    t.pass('the two calls that went well, without it')
  })
})
