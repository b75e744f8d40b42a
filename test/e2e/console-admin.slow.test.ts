import t, { type Test } from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { loadConfig } from '../../config/load.js'
import { fromRoot } from '../../paths.js'
import { GatewayServer } from '../../server.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { mockMcpHttp, type MockMcpHttp } from '../mock-mcp.js'
import { build, childEnv, KEY_A, mockCatalog } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { WEBHOOK_SECRET } from '../webhook-receiver.js'

// The operator's console (/console/admin) in headless Chromium (Debian's /usr/bin/chromium via
// playwright-core), at desktop and phone widths, against a gateway in this process in front of the
// mock upstream. The gateway is a GatewayServer (what `modelgate serve` runs: buildApp, listening
// on 127.0.0.1 port 0), because reloading the config file and the providers' health belong to a
// serving process. Every step goes through the page (typing, clicking, reading what it shows),
// and what the page did is checked with real calls through the gateway.
//
// SCREENSHOTS=1 writes the screenshots of the docs into docs/images/ (tracked: off by default).

const CHROMIUM = '/usr/bin/chromium'
const ADMIN = 'admin-console-token-0123456789abcdef'
const SCREENSHOTS = process.env.SCREENSHOTS === '1'
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

t.test('with no admin token configured, /console/admin says the admin API is off', async (t) => {
  const app = await build(t)
  for (const url of ['/console/admin', '/console/admin/']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 404, url)
    t.match(res.headers['content-type'], /text\/html/)
    t.match(res.body, /The admin API is off/)
    t.equal(res.headers['content-security-policy'], CSP)
  }
  t.equal((await app.inject({ url: '/admin/v1/orgs', headers: { authorization: `Bearer ${ADMIN}` } })).statusCode, 404, 'as the admin API itself')
})

t.test('in headless Chromium', { skip: existsSync(CHROMIUM) ? false : 'Chromium is not installed at /usr/bin/chromium (.ci/run installs it)' }, async (t) => {
  if (!existsSync(fromRoot('dist', 'console', 'admin', 'index.html'))) {
    execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })
  }

  let mock: MockUpstream
  let mcp: MockMcpHttp
  let server: GatewayServer
  let base: string
  let browser: Browser
  let file: string
  let raw: Record<string, unknown>

  // the gateway's clock, moved back while seeding traffic over the past day
  let back = 0
  const clock = { now: () => Date.now() - back }

  const writeConfig = (changes: Record<string, unknown> = {}): void => { writeFileSync(file, JSON.stringify({ ...raw, ...changes })) }
  const plugins = (storeContent: boolean): unknown[] => [
    { name: 'auth' }, { name: 'balance' }, { name: 'cache' }, { name: 'usage', options: { store_content: storeContent } }, { name: 'diagnostics' }
  ]

  t.before(async () => {
    mock = await startMockUpstream()
    mcp = await mockMcpHttp()
    file = join(tempDir('console-admin'), 'gateway.json')
    raw = {
      server: { port: 0, request_timeout_s: 10 },
      store: { sqlite: ':memory:' },
      admin: { token: ADMIN },
      plugins: plugins(true),
      // and a model the price database knows, whose catalog price lacks its cache writes
      ...mockCatalog(mock, [{
        id: 'anthropic/claude-haiku-4-5',
        name: 'Claude Haiku 4.5',
        provider: 'mock-messages',
        upstream_model: 'claude-haiku-4-5',
        context_length: 200000,
        architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
        pricing: { input: 1, cached_input: 0.1, output: 5 }
      }]),
      // an MCP server, and one that is down (nothing listens on port 9 of loopback)
      mcp: { servers: [{ id: 'docs', transport: 'http', url: mcp.url, pricing: { per_call: 0.001 } }, { id: 'gone', transport: 'http', url: 'http://127.0.0.1:9/mcp', timeout_s: 2 }] },
      tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, name: 'a' }] }] }],
      // a webhook nobody answers (nothing listens on port 9 of loopback): its deliveries stay pending
      alerts: { webhooks: [{ url: 'http://127.0.0.1:9/hooks', secret: WEBHOOK_SECRET }] }
    }
    writeConfig()
    server = await GatewayServer.start({ file, config: await loadConfig(file), host: '127.0.0.1', clock })
    base = `http://127.0.0.1:${(await server.listen()).port}`
    await seed()
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  })
  t.teardown(async () => { await browser?.close(); await server?.close(); await mock?.close(); await mcp?.close() })

  /** A call through the gateway with an API key: its status and trace id. */
  async function call (key: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<{ status: number, trace: string }> {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'openai/gpt-test', max_tokens: 64, messages: [{ role: 'user', content: 'hello from the console test' }], ...body })
    })
    await res.text()
    return { status: res.status, trace: res.headers.get('x-svc-trace-id') ?? '' }
  }

  /** An MCP tools/call through the gateway with an API key: its JSON-RPC answer and trace id. */
  async function toolCall (key: string, name: string, args: Record<string, unknown>): Promise<{ body: { result?: unknown, error?: { code: number } }, trace: string }> {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } })
    })
    return { body: await res.json() as { result?: unknown, error?: { code: number } }, trace: res.headers.get('x-svc-trace-id') ?? '' }
  }

  /**
   * Traffic of the acme organization over the past day, so that the overview has something to
   * draw: calls in several hours, of two models, some answered from the response cache (what
   * they saved is shown) and some failed at the provider (errors).
   */
  async function seed (): Promise<void> {
    const unexpected: string[] = []
    const expect = async (status: number, body: Record<string, unknown>, headers?: Record<string, string>): Promise<void> => {
      const got = (await call(KEY_A, body, headers)).status
      if (got !== status) unexpected.push(`${got} instead of ${status} ${back / 3_600_000} hours ago`)
    }
    for (const [i, hours] of [22, 20, 17, 15, 12, 10, 7, 5, 3, 1].entries()) {
      back = hours * 3_600_000
      const model = i % 3 === 2 ? 'anthropic/claude-test' : 'openai/gpt-test'
      const content = `traffic of ${hours} hours ago: ${'words '.repeat(20 + 15 * (i % 4))}`
      for (let n = 0; n < 1 + (i % 3); n++) await expect(200, { model, messages: [{ role: 'user', content: `${content} ${n}` }] })
      if (i % 2 === 0) {
        // the same call twice, the second answered from the cache
        for (let n = 0; n < 2; n++) await expect(200, { model, messages: [{ role: 'user', content }] }, { 'x-svc-cache': 'on' })
      }
      if (i % 4 === 1) {
        mock.faults = { status: { status: 500, times: 1 } }
        await expect(502, { model })
      }
    }
    back = 0
    t.same(unexpected, [], 'the traffic of the past day, seeded')
  }

  /** A page in a context of its own (its own session storage), with what would be a problem recorded. */
  async function open (width: number, height: number): Promise<{ context: BrowserContext, page: Page, problems: string[] }> {
    const context = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: width < 600 ? 2 : 1, permissions: ['clipboard-read', 'clipboard-write'] })
    const page = await context.newPage()
    page.setDefaultTimeout(15_000)
    const problems: string[] = []
    page.on('console', (m) => {
      // the 401 of a wrong token and the 400 of an invalid config are answers the page expects
      if (/Failed to load resource: the server responded with a status of 40[01]\b/.test(m.text())) return
      if (m.type() === 'error' || /Content.Security.Policy/i.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`)
    })
    page.on('pageerror', (e) => { problems.push(`page error: ${e.message}`) })
    // reported by the browser for every blocked inline script or style, eval, or other origin
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => { console.error(`Content-Security-Policy violation: ${e.violatedDirective} ${e.blockedURI}`) })
    })
    return { context, page, problems }
  }

  const tab = async (page: Page, name: string): Promise<void> => {
    await page.click(`#tab-${name}`)
    await page.waitForSelector(`#view-${name}:not([hidden])`)
  }
  const text = async (page: Page, selector: string): Promise<string> => (await page.textContent(selector)) ?? ''
  const noOverflow = async (t: Test, page: Page, where: string): Promise<void> => {
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
    t.ok(overflow <= 0, `${where}: no horizontal scrolling (${overflow}px)`)
  }
  const shot = async (page: Page, name: string, fullPage = false): Promise<void> => {
    if (!SCREENSHOTS) return
    mkdirSync(fromRoot('docs', 'images'), { recursive: true })
    await page.screenshot({ path: fromRoot('docs', 'images', name), fullPage })
  }
  /** With SCREENSHOTS=1, every section at each width, into test-output/ (which git ignores), to look at. */
  const look = async (page: Page, name: string): Promise<void> => {
    if (SCREENSHOTS) await page.screenshot({ path: fromRoot('test-output', 'screenshots', `admin-${name}-${page.viewportSize()?.width}.png`), fullPage: true })
  }

  /**
   * The whole round at one width: sign in (a wrong token first), create an organization, a
   * project and a key, call with it, find the call in the log and open it, see it in the overview,
   * rotate the key (`grace_s`), revoke it, look at providers and plugins, reload, sign out.
   */
  async function round (t: Test, o: { width: number, height: number, org: string, grace: number, stored: boolean, phone: boolean }): Promise<void> {
    const { context, page, problems } = await open(o.width, o.height)
    const res = await page.goto(`${base}/console/admin`)
    t.equal(res?.status(), 200)
    t.equal(res?.headers()['content-security-policy'], CSP, 'the page may load only from this origin')
    t.equal(res?.headers()['x-content-type-options'], 'nosniff')
    t.equal(res?.headers()['referrer-policy'], 'no-referrer')

    // a wrong token is refused, and not kept
    await page.waitForSelector('#signin:not([hidden]) #token')
    await page.fill('#token', 'not-the-admin-token')
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#signin-error:not([hidden])')
    t.match(await text(page, '#signin-error'), /not accepted/)
    t.equal(await page.evaluate(() => sessionStorage.getItem('modelgate.adminToken')), null, 'a refused token is not kept')
    t.ok(await page.isHidden('#nav'), 'no sections without the token')

    await page.fill('#token', ADMIN)
    await Promise.all([page.waitForResponse((r) => r.url().endsWith('/admin/v1/whoami') && r.status() === 200), page.click('#signin button[type=submit]')])
    await page.waitForSelector('#view-overview:not([hidden])')
    t.equal(await page.getAttribute('#tab-overview', 'aria-selected'), 'true')
    t.equal(await page.evaluate(() => sessionStorage.getItem('modelgate.adminToken')), ADMIN, 'the token is kept for this tab')

    // ---- tenants: an organization, a project, credits
    await tab(page, 'tenants')
    await page.waitForSelector('#orgs tr[data-org="acme"]')
    await page.fill('#org-id', o.org)
    await page.fill('#org-balance', '5')
    await page.fill('#org-quota', '1000000')
    await page.selectOption('#org-quota-unit', 'tokens')
    await page.click('#org-form button[type=submit]')
    await page.waitForSelector(`#orgs tr[data-org="${o.org}"]`)
    t.match(await text(page, '#tn-status'), `Organization ${o.org} created`)
    t.match(await text(page, `#orgs tr[data-org="${o.org}"]`), /\$5\b/)
    t.match(await text(page, `#orgs tr[data-org="${o.org}"]`), /0 of 1000000 tokens per day/, 'its quota')

    await page.selectOption('#project-org', o.org)
    await page.fill('#project-id', 'app')
    await page.click('#project-form button[type=submit]')
    await page.waitForSelector(`#orgs tr[data-org="${o.org}"] li[data-project="app"]`)

    await page.selectOption('#credits-org', o.org)
    await page.fill('#credits-amount', '2.5')
    await page.click('#credits-form button[type=submit]')
    await page.waitForFunction((org) => document.querySelector(`#orgs tr[data-org="${org}"] td`)?.textContent === '$7.5', o.org)
    t.pass('credits added: the balance is $7.5')
    await look(page, 'tenants')
    if (o.phone) await noOverflow(t, page, 'tenants')

    // ---- keys: create one, read its secret from the page
    await tab(page, 'keys')
    await page.click('#key-create summary')
    await page.selectOption('#key-org', o.org)
    await page.selectOption('#key-project', 'app')
    await page.fill('#key-name', 'console-made')
    await page.fill('#key-models', 'openai/*')
    await page.fill('#key-mcp', 'docs/echo')
    await page.fill('#key-rpm', '100')
    await page.fill('#key-budget', '3')
    await page.selectOption('#key-budget-per', 'month')
    await page.click('#key-form button[type=submit]')
    await page.waitForSelector('#secret:not([hidden])')
    const secret = await page.inputValue('#secret-value')
    t.match(secret, /^mg-/, 'the secret is shown')
    t.match(await text(page, '#secret-note'), /cannot be shown again/)
    const keyRow = page.locator('#keys tbody tr', { hasText: 'console-made' })
    const keyId = await keyRow.getAttribute('data-key-id') ?? ''
    t.match(await keyRow.textContent(), /100 rpm/)
    t.match(await keyRow.textContent(), /MCP: docs\/echo/, 'its MCP tools')
    t.match(await keyRow.textContent(), /\$0 of \$3 per month/)
    await page.click('#secret-copy')
    await page.waitForFunction(() => document.getElementById('secret-copied')?.textContent !== '')
    t.match(await text(page, '#secret-copied'), /Copied/, 'the copy button answers')
    t.equal(await page.evaluate(async () => await navigator.clipboard.readText()), secret, 'the secret is on the clipboard')
    await page.click('#secret-done')
    t.equal(await page.inputValue('#secret-value'), '', 'the secret is gone from the page once dismissed')
    if (o.phone) await noOverflow(t, page, 'keys')

    // the key works: a call to a model with two providers, the first one down, and a field the model drops
    const made = await call(secret, { model: 'openai/failover', seed: 7 })
    t.equal(made.status, 200, 'a call with the new key')
    t.equal((await call(secret, { model: 'anthropic/claude-test' })).status, 404, 'only the models it was given')
    const tool = await toolCall(secret, 'docs__echo', { text: 'from the console test' })
    t.same(tool.body.result, { content: [{ type: 'text', text: 'from the console test' }] }, 'and the MCP tool it was given')
    t.equal((await toolCall(secret, 'docs__add', { a: 1, b: 2 })).body.error?.code, -32602, 'no other')

    // edit: the limits and the name change
    await keyRow.locator('button[data-action=edit]').click()
    await page.waitForSelector('#edit-dialog[open]')
    t.equal(await page.inputValue('#edit-mcp'), 'docs/echo')
    await page.fill('#edit-mcp', 'docs/echo, docs/add')
    await page.fill('#edit-name', 'console-key')
    await page.fill('#edit-rpm', '')
    await page.fill('#edit-tpm', '50000')
    await page.click('#edit-form button[type=submit]')
    await page.waitForSelector('#edit-dialog', { state: 'hidden' })
    await page.waitForSelector(`#keys tr[data-key-id="${keyId}"]:has-text("console-key")`)
    t.match(await text(page, `#keys tr[data-key-id="${keyId}"]`), /50000 tpm/)
    t.notMatch(await text(page, `#keys tr[data-key-id="${keyId}"]`), /rpm/, 'an emptied limit is removed')
    t.match((await toolCall(secret, 'docs__add', { a: 1, b: 2 })).body.result, { structuredContent: { sum: 3 } }, 'a tool granted in the dialog')

    // ---- the request log: find the call and open it
    await tab(page, 'log')
    await page.fill('#lf-org', o.org)
    await page.selectOption('#lf-status', 'ok')
    await page.selectOption('#lf-endpoint', 'chat.completions')
    await Promise.all([
      page.waitForResponse((r) => r.url().includes('/admin/v1/usage?') && r.url().includes(`org=${o.org}`)),
      page.click('#log-filter button[type=submit]')
    ])
    await page.waitForSelector(`#log tr[data-trace="${made.trace}"]`)
    t.equal(await page.locator('#log tbody tr[data-trace]').count(), 1, 'the organization has this one call')
    await page.click(`#log tr[data-trace="${made.trace}"] button[data-open]`)
    await page.waitForSelector('#call-dialog[open] #call-body dl')
    const detail = await text(page, '#call-body')
    t.match(detail, /Provider\s*mock-openai/, 'the provider that answered')
    t.match(detail, /Input tokens\s*\d+/)
    t.match(detail, /Output tokens\s*\d+/)
    t.match(detail, /Cost\s*\$0\.\d+/)
    t.match(detail, /Cost by part\s*input \$0\.\d+, output \$0\.\d+/, 'the charge by part')
    t.match(detail, /Time to first token/)
    await page.waitForSelector('#call-attempts')
    const attempts = await page.$$eval('#call-attempts tbody tr', (rows) => rows.map((r) => r.textContent ?? ''))
    t.ok(attempts.length >= 2, `every attempt: ${attempts.length}`)
    t.match(attempts[0], /mock-dead/, 'the provider that was down first')
    t.match(attempts.at(-1), /mock-openai/, 'then the one that answered')
    t.match(await text(page, '#call-dropped'), /seed/, 'the dropped parameter')
    if (o.stored) {
      t.match(await text(page, '#call-content'), /hello from the console test/, 'the stored request')
    } else {
      t.match(await text(page, '#call-content'), /Not stored/)
    }
    if (!o.phone) await shot(page, 'console-admin-log.png')
    await look(page, 'call')
    if (o.phone) await noOverflow(t, page, 'request log')
    await page.keyboard.press('Escape')
    await page.waitForSelector('#call-dialog', { state: 'hidden' })

    // the tool calls of the key, and one opened
    await Promise.all([
      page.waitForResponse((r) => r.url().includes('/admin/v1/usage?') && r.url().includes('endpoint=mcp.tools_call')),
      page.selectOption('#lf-endpoint', 'mcp.tools_call').then(async () => { await page.click('#log-filter button[type=submit]') })
    ])
    await page.waitForSelector(`#log tr[data-trace="${tool.trace}"]`)
    t.equal(await page.locator('#log tbody tr[data-trace]').count(), 2, 'its two tool calls that ran')
    t.match(await text(page, `#log tr[data-trace="${tool.trace}"]`), /tool\s*docs\/echo/)
    await page.click(`#log tr[data-trace="${tool.trace}"] button[data-open]`)
    await page.waitForSelector('#call-dialog[open] #call-body dl')
    t.equal(await text(page, '#call-title'), 'Tool call to docs/echo')
    const toolDetail = await text(page, '#call-body')
    t.match(toolDetail, /Endpoint\s*mcp\.tools_call/)
    t.match(toolDetail, /MCP server\s*docs/)
    t.match(toolDetail, /Cost\s*\$0\.001/, 'the server\'s price per call')
    await page.keyboard.press('Escape')
    await page.waitForSelector('#call-dialog', { state: 'hidden' })

    // ---- the overview counts it
    const summary = await (await fetch(`${base}/admin/v1/usage/summary`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { data: Array<{ calls: number, cost_usd: string }> }
    await tab(page, 'overview')
    await page.waitForSelector('#ov-totals [data-stat=calls]')
    await page.waitForSelector('#chart-calls .uplot canvas')
    // the section shows what it loaded at sign-in until its new figures come: wait for them (or time out and fail below)
    await page.waitForFunction((calls) => document.querySelector('#ov-totals [data-stat=calls] .v')?.textContent === calls, String(summary.data[0]?.calls), { timeout: 5000 }).catch(() => {})
    t.equal(await text(page, '#ov-totals [data-stat=calls] .v'), String(summary.data[0]?.calls), 'the calls of the last 24 hours')
    t.equal(await text(page, '#ov-totals [data-stat=cost] .v'), `$${summary.data[0]?.cost_usd}`, 'their spend')
    t.match(await text(page, '#ov-totals'), /Saved by the cache/)
    t.match(await text(page, '#ov-orgs'), new RegExp(o.org), 'the organization among the top ones')
    t.match(await text(page, '#ov-models'), /openai\/failover/)
    t.equal(await page.locator('.charts .uplot').count(), 3, 'three charts')
    t.match(await text(page, '#ov-tags'), /untagged/, 'spend by tag: the seeded calls carry none')

    // ---- the alerts' deliveries
    await server.app.alerts.raise('balance.low', 'e2e:balance', { org: 'acme', balance_usd: '3' })
    await tab(page, 'alerts')
    // (the other rows: the keys rotated with a grace are about to expire, key.expiring)
    const row = page.locator('#deliveries tr[data-delivery]', { hasText: 'balance.low' })
    await row.first().waitFor()
    const delivery = await row.first().innerText()
    t.match(delivery, /balance\.low/, 'the event')
    t.match(delivery, /acme: \$3 left/, 'what it says')
    t.match(delivery, /127\.0\.0\.1:9\/hooks/, 'its webhook')
    t.match(delivery, /pending/, 'not delivered: nobody answers')
    await tab(page, 'overview')
    t.match(await page.getAttribute('#chart-calls', 'aria-label'), /calls/, 'the chart says what it shows')
    await page.selectOption('#ov-range', '7d')
    await page.waitForFunction(() => /per day/.test(document.getElementById('chart-calls')?.getAttribute('aria-label') ?? ''))
    t.equal(await text(page, '#ov-totals [data-stat=calls] .v'), String(summary.data[0]?.calls), 'the same calls by day')
    await page.selectOption('#ov-range', '24h')
    await page.waitForFunction(() => /per hour/.test(document.getElementById('chart-calls')?.getAttribute('aria-label') ?? ''))
    if (!o.phone) await shot(page, 'console-admin-overview.png', true)
    await look(page, 'overview')
    if (o.phone) {
      await noOverflow(t, page, 'overview')
      await shot(page, 'console-admin-phone.png')
    }

    // ---- rotate: the new secret shown once; the old one works within the grace period only
    await tab(page, 'keys')
    await page.waitForSelector(`#keys tr[data-key-id="${keyId}"] button[data-action=rotate]`)
    await page.click(`#keys tr[data-key-id="${keyId}"] button[data-action=rotate]`)
    await page.waitForSelector('#rotate-dialog[open]')
    await page.fill('#rotate-grace', String(o.grace))
    await page.click('#rotate-form button[type=submit]')
    await page.waitForSelector('#secret:not([hidden])')
    const rotated = await page.inputValue('#secret-value')
    t.match(rotated, /^mg-/)
    t.not(rotated, secret, 'a new secret')
    t.match(await text(page, '#secret-note'), new RegExp(`replacing ${keyId}`))
    t.equal((await call(rotated)).status, 200, 'the new secret works')
    t.equal((await call(secret)).status, o.grace > 0 ? 200 : 401, o.grace > 0 ? 'the old secret works within the grace period' : 'the old secret is refused with no grace')
    const newId = await page.locator('#keys tbody tr', { hasText: `replaces ${keyId}` }).getAttribute('data-key-id') ?? ''
    t.not(newId, keyId)
    if (!o.phone) await shot(page, 'console-admin-keys.png')
    await look(page, 'keys')
    // a new secret is kept, other sections visited meanwhile, until the operator is done with it
    await tab(page, 'overview')
    t.equal(await page.getAttribute('#tab-keys', 'data-secret'), 'waiting', 'the keys tab says a secret waits')
    await tab(page, 'keys')
    t.equal(await page.inputValue('#secret-value'), rotated, 'the new secret is still there when the keys section is opened again')
    await page.click('#secret-done')
    t.match(await text(page, '#secret-copied'), /not copied, and it cannot be shown again/, 'not copied: "Done" warns first')
    t.equal(await page.inputValue('#secret-value'), rotated, 'and keeps it')
    await page.click('#secret-done')
    t.ok(await page.isHidden('#secret'), 'a second "Done" discards it')
    t.equal(await page.inputValue('#secret-value'), '', 'gone from the page')
    t.equal(await page.getAttribute('#tab-keys', 'data-secret'), null)

    // ---- revoke, after a confirmation
    await page.click(`#keys tr[data-key-id="${newId}"] button[data-action=revoke]`)
    await page.waitForSelector('#revoke-dialog[open]')
    t.match(await text(page, '#revoke-text'), /401/)
    await page.click('#revoke-dialog button[data-close]')
    await page.waitForSelector('#revoke-dialog', { state: 'hidden' })
    t.equal((await call(rotated)).status, 200, 'cancelled: the key still works')
    await page.click(`#keys tr[data-key-id="${newId}"] button[data-action=revoke]`)
    await page.click('#revoke-form button[type=submit]')
    await page.waitForSelector(`#keys tr[data-key-id="${newId}"] .badge:has-text("revoked")`)
    t.equal((await call(rotated)).status, 401, 'a revoked key answers 401')

    // ---- providers and plugins
    await tab(page, 'providers')
    await page.waitForSelector('#providers tr[data-provider="mock-openai"]')
    t.match(await text(page, '#providers tr[data-provider="mock-openai"]'), /closed/)
    t.match(await text(page, '#providers tr[data-provider="mock-dead"]'), /127\.0\.0\.1:9/)
    t.match(await text(page, '#providers tr[data-provider="mock-nokey"]'), /no credentials/)
    // the catalog's prices against the price database: the Claude model's missing cache write prices
    await page.waitForSelector('#prices tr[data-model="anthropic/claude-haiku-4-5"]')
    t.match(await text(page, '#prices tr[data-model="anthropic/claude-haiku-4-5"][data-field="cache_write"]'), /cache_write\s*\$1\s*\$1\.25\s*@pydantic\/genai-prices/)
    t.match(await text(page, '#prices tr[data-model="anthropic/claude-haiku-4-5"][data-field="cache_write_1h"]'), /\$1\s*\$2\b/)
    t.match(await text(page, '#pc-summary'), /2 price\(s\) differ\. Not in the database: .*openai\/gpt-test/)
    await page.waitForSelector('#mcp-section:not([hidden]) #mcp-servers tr[data-mcp-server="docs"]')
    t.match(await text(page, '#mcp-servers tr[data-mcp-server="docs"]'), /http\s*ready.*echo, add, slow/, 'the MCP servers, their status and tools')
    t.match(await text(page, '#mcp-servers tr[data-mcp-server="gone"]'), /(down|starting).*ECONNREFUSED/, 'one that is down, with why (or trying again)')
    if (o.phone) await noOverflow(t, page, 'providers')
    await look(page, 'providers')

    await tab(page, 'plugins')
    await page.waitForSelector('#plugins tr[data-plugin="usage"]')
    t.same(await page.$$eval('#plugins tbody tr', (rows) => rows.map((r) => r.getAttribute('data-plugin'))), ['auth', 'balance', 'cache', 'usage', 'diagnostics', 'metrics'], 'the chain in order (metrics: its own config section)')
    t.match(await text(page, '#pl-generation'), /generation \d+/)
    if (o.phone) await noOverflow(t, page, 'plugins')
    await look(page, 'plugins')

    await context.close()
    t.same(problems, [], 'no CSP violation, console error or page error')
  }

  t.test('desktop: the whole round through the page', async (t) => {
    await round(t, { width: 1280, height: 900, org: 'ops-desk', grace: 3600, stored: true, phone: false })
  })

  t.test('the reload button shows what changed, or every problem of the file', async (t) => {
    const { context, page, problems } = await open(1280, 900)
    await page.goto(`${base}/console/admin#plugins`)
    await page.fill('#token', ADMIN)
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#plugins tr[data-plugin="usage"]')
    const before = await text(page, '#pl-generation')

    writeConfig({ plugins: [...plugins(true), { name: 'no-such-plugin' }] })
    await page.click('#pl-reload')
    await page.waitForSelector('#pl-result.error li')
    t.match(await text(page, '#pl-result'), /Not reloaded/)
    t.match(await text(page, '#pl-result li'), /no-such-plugin/, 'the problem, with its path')
    t.equal(await text(page, '#pl-generation'), before, 'the running configuration is kept')

    // the request text is not stored from now on (the phone round checks that its call says so)
    writeConfig({ plugins: plugins(false) })
    await page.click('#pl-reload')
    await page.waitForSelector('#pl-result.ok li')
    t.match(await text(page, '#pl-result'), /Reloaded/)
    t.match(await text(page, '#pl-result li'), /usage/, 'the change')
    await page.waitForFunction((b) => document.getElementById('pl-generation')?.textContent !== b, before)
    t.match(await text(page, '#plugins tr[data-plugin="usage"]'), /"store_content": false/)

    await context.close()
    t.same(problems, [], 'no CSP violation, console error or page error')
  })

  t.test('phone: the whole round at 390 px', async (t) => {
    await round(t, { width: 390, height: 844, org: 'ops-phone', grace: 0, stored: false, phone: true })
  })

  t.test('the tabs by keyboard alone, with a visible focus; signing out forgets the token', async (t) => {
    const { context, page, problems } = await open(1280, 900)
    await page.goto(`${base}/console/admin`)
    await page.waitForSelector('#token')
    await page.keyboard.type(ADMIN) // the field has the focus
    await page.keyboard.press('Enter')
    await page.waitForSelector('#view-overview:not([hidden])')

    // the token is kept across a reload of the tab; from the top of the page, Tab reaches the
    // selected tab (after the skip link and Sign out)
    await page.reload()
    await page.waitForSelector('#view-overview:not([hidden])')
    let focused = ''
    for (let i = 0; i < 5 && focused !== 'tab-overview'; i++) {
      await page.keyboard.press('Tab')
      focused = await page.evaluate(() => document.activeElement?.id ?? '')
    }
    t.equal(focused, 'tab-overview', 'the selected tab is reached with Tab')
    t.not(await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle), 'none', 'and its focus is visible')

    const selected = async (): Promise<string> => await page.evaluate(() => `${document.activeElement?.id} ${document.querySelector('[role=tab][aria-selected=true]')?.id} ${document.querySelector('[role=tabpanel]:not([hidden])')?.id}`)
    await page.keyboard.press('ArrowRight')
    t.equal(await selected(), 'tab-tenants tab-tenants view-tenants', 'ArrowRight: the next tab, focused, selected and shown')
    await page.keyboard.press('End')
    t.equal(await selected(), 'tab-sessions tab-sessions view-sessions', 'End: the last')
    await page.keyboard.press('ArrowRight')
    t.equal(await selected(), 'tab-overview tab-overview view-overview', 'ArrowRight on the last: the first')
    await page.keyboard.press('ArrowLeft')
    t.equal(await selected(), 'tab-sessions tab-sessions view-sessions', 'ArrowLeft on the first: the last')
    await page.keyboard.press('Home')
    t.equal(await selected(), 'tab-overview tab-overview view-overview', 'Home: the first')
    t.equal(await page.$$eval('[role=tab]', (tabs) => tabs.filter((x) => (x as HTMLElement).tabIndex === 0).length), 1, 'one tab stop for the tab list')
    await page.keyboard.press('Tab')
    t.equal(await page.evaluate(() => document.activeElement?.id), 'ov-range', 'Tab leaves the tab list for the section')
    // every control of every section has a name
    const unnamed = await page.evaluate(() => [...document.querySelectorAll('input, select, button, textarea')]
      .filter((e) => (e as HTMLInputElement).labels?.length === 0 && e.getAttribute('aria-label') === null && (e.textContent ?? '').trim() === '')
      .map((e) => e.id || e.outerHTML))
    t.same(unnamed, [], 'every control has a label')

    await page.keyboard.press('Shift+Tab')
    await page.keyboard.press('Shift+Tab')
    t.equal(await page.evaluate(() => document.activeElement?.id), 'signout')
    await page.keyboard.press('Enter')
    await page.waitForSelector('#signin-view:not([hidden])')
    t.equal(await page.evaluate(() => sessionStorage.getItem('modelgate.adminToken')), null, 'signing out forgets the token')
    t.equal(await page.evaluate(() => document.activeElement?.id), 'token', 'focus back on the token field')
    t.ok(await page.isHidden('#nav'))
    t.notMatch(page.url(), ADMIN, 'the token was never in the URL')
    t.same(await context.cookies(), [], 'nor in a cookie')
    await context.close()
    t.same(problems, [], 'no CSP violation, console error or page error')
  })

  t.test('the page and its assets: headers, caching, and the developer console beside it', async (t) => {
    const page = await fetch(`${base}/console/admin/`)
    t.equal(page.status, 200)
    t.equal(page.headers.get('cache-control'), 'no-cache')
    t.equal(page.headers.get('content-security-policy'), CSP)
    const html = await page.text()
    t.notMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script')
    t.notMatch(html, /<style|\sstyle=/, 'no inline style')
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/admin\/assets\/[^"]+)"/g)].map((m) => m[1] as string)
    t.equal(assets.length, 2, 'a script and a stylesheet')
    for (const a of assets) {
      t.match(a, /-[A-Z0-9]{8}\.(js|css)$/, 'content-hashed')
      const res = await fetch(`${base}${a}`)
      t.equal(res.status, 200)
      t.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable')
      t.equal(res.headers.get('content-security-policy'), CSP)
      t.equal(res.headers.get('x-content-type-options'), 'nosniff')
      await res.arrayBuffer()
    }
    const dev = await fetch(`${base}/console/`)
    t.equal(dev.status, 200)
    t.equal(dev.headers.get('content-security-policy'), CSP, 'the developer console has the same policy')
    t.equal(dev.headers.get('cache-control'), 'no-cache')
    const devHtml = await dev.text()
    t.match(devHtml, /Model marketplace/)
    const devScript = /src="(\/console\/assets\/main-[^"]+)"/.exec(devHtml)?.[1] ?? ''
    const script = await fetch(`${base}${devScript}`)
    t.equal(script.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'its hashed assets are cached for good')
    await script.arrayBuffer()
    t.equal((await fetch(`${base}/console/assets/../admin/index.html`)).headers.get('content-security-policy'), CSP, 'the admin page is served only with its headers')
  })
})
