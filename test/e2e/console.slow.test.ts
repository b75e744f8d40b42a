import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { mockMcpHttp, type MockMcpHttp } from '../mock-mcp.js'
import { childEnv, KEY_A, KEY_B, settled, testConfig } from '../helper.js'

// The developer console in headless Chromium (Debian's /usr/bin/chromium via playwright-core).

const CHROMIUM = '/usr/bin/chromium'

if (!existsSync(CHROMIUM)) {
  t.plan(0, 'Chromium is not installed at /usr/bin/chromium (.ci/run installs it)')
} else {
  if (!existsSync(fromRoot('dist', 'console', 'index.html'))) {
    execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })
  }

  let app: FastifyInstance
  let base: string
  let browser: Browser

  let mcp: MockMcpHttp
  t.before(async () => {
    const defaults = testConfig()
    // one model with a whole price sheet: cache writes, audio tokens, a long-context tier, a per-request price
    const sheet = {
      ...defaults.models.find((m) => m.id === 'anthropic/claude-x'),
      pricing: { input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6, output: 15, input_audio: 9, output_audio: 18, per_request: 0.001, tiers: [{ above_input_tokens: 100000, input: 6, cached_input: 0.6, cache_write: 7.5, cache_write_1h: 12, output: 22.5, input_audio: 12, output_audio: 24 }] }
    }
    mcp = await mockMcpHttp()
    app = await buildApp(testConfig({
      plugins: [{ name: 'auth' }, { name: 'cache' }, { name: 'usage' }],
      models: defaults.models.map((m) => m.id === 'anthropic/claude-x' ? sheet : m),
      mcp: { servers: [{ id: 'docs', transport: 'http', url: mcp.url }] }
    }))
    await app.listen({ host: '127.0.0.1', port: 0 })
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] })
  })
  t.teardown(async () => { await browser?.close(); await app?.close(); await mcp?.close() })

  // real calls through the gateway, so the usage views show what metering recorded
  // (the last one is answered from the cache with what the first one stored)
  async function seedUsage (): Promise<void> {
    for (const [model, stream] of [['demo/gpt', false], ['demo/claude', true], ['demo/gpt', true]] as const) {
      const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', 'x-svc-cache': 'on', 'x-svc-tags': model === 'demo/claude' ? 'team-b' : 'team-a' }, body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hello console' }] }) })
      await res.text()
    }
    await settled()
  }

  t.test('the marketplace lists active models with prices and "No public price", and filters', async (t) => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    await page.goto(`${base}/console`)
    await page.waitForSelector('#models li')
    const ids = await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id')))
    t.same([...ids].sort(), ['anthropic/claude-x', 'demo/claude', 'demo/gpt', 'openai/no-price'])
    t.notOk(ids.includes('anthropic/claude-old') || ids.includes('anthropic/claude-gone'), 'deprecated and offline models hidden')
    const gpt = await page.textContent('[data-id="demo/gpt"]')
    t.match(gpt, /Input \/ 1M tokens\$1/)
    t.match(gpt, /Cached input \/ 1M tokens\$0\.5/)
    t.match(gpt, /Output \/ 1M tokens\$2/)
    t.match(await page.textContent('[data-id="openai/no-price"]'), /No public price/)
    t.notMatch(gpt, /Cache write|Audio|Prompts over/, 'no cache write, audio rate or tier where none is set')
    const claude = await page.textContent('[data-id="anthropic/claude-x"]')
    t.match(claude, /Cache write \/ 1M tokens\$3\.75/)
    t.match(claude, /1h cache write \/ 1M tokens\$6/)
    t.match(claude, /Audio input \/ 1M tokens\$9.*Audio output \/ 1M tokens\$18/s, 'audio tokens at their own rates')
    t.match(claude, /Prompts over100K tokens.*Input \/ 1M tokens\$6.*Output \/ 1M tokens\$22\.5.*Cache write \/ 1M tokens\$7\.5.*1h cache write \/ 1M tokens\$12.*Audio input \/ 1M tokens\$12.*Audio output \/ 1M tokens\$24/s, 'the long-context tier')
    t.match(claude, /Per request\$0\.001/)
    await page.click('#quickstart summary')
    await page.waitForSelector('#qs-mcp:not([hidden])')
    const quick = await page.textContent('#quickstart') ?? ''
    t.match(quick, `base URL ${base}/v1`, 'the quick start names this gateway\'s address')
    t.match(quick, `curl ${base}/v1/chat/completions`)
    t.match(quick, `claude mcp add --transport http modelgate ${base}/mcp --header "Authorization: Bearer $MODELGATE_KEY"`, 'and, since it serves MCP tools, how to add it to an MCP client')
    t.match(JSON.parse(await page.textContent('#qs-json') ?? '{}'), { mcpServers: { modelgate: { type: 'http', url: `${base}/mcp` } } })
    await page.screenshot({ path: fromRoot('test-output', 'screenshots', 'marketplace.png'), fullPage: true })

    await page.fill('#q', 'claude')
    t.same(await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id')).sort()), ['anthropic/claude-x', 'demo/claude'], 'search')
    await page.fill('#q', '')
    await page.selectOption('#vendor', 'openai')
    t.same(await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id'))), ['openai/no-price'], 'vendor filter')
    await page.selectOption('#vendor', '')
    await page.selectOption('#modality', 'image')
    t.notOk((await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id')))).includes('openai/no-price'), 'modality filter')
    await page.selectOption('#modality', '')
    await page.selectOption('#sort', 'price-asc')
    const sorted = await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id')))
    t.equal(sorted.at(-1), 'openai/no-price', 'models with no price sort last')
    await page.close()
  })

  t.test('signing in with a key shows that project\'s usage; a wrong key shows an error', async (t) => {
    await seedUsage()
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } })
    await page.goto(`${base}/console/#usage`)
    await page.fill('#apikey', 'mg-wrong-key-000000000000000000')
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#signin-error:not([hidden])')
    t.match(await page.textContent('#signin-error'), /not accepted/)
    await page.fill('#apikey', KEY_A)
    await page.click('#signin button[type=submit]')
    await page.waitForSelector('#dashboard:not([hidden])')
    await page.waitForSelector('#calls tbody tr td')
    t.match(await page.textContent('#who'), /acme\/web/)
    const stats = await page.textContent('#stats') ?? ''
    t.match(stats, /3\s*Calls/)
    const [first] = (await app.gateway.store.usage.page({ model: 'demo/gpt' }, 10)).filter((r) => r.cache_hit === 0)
    const saved = /\$([\d.]+)\s*Saved by the cache/.exec(stats)?.[1]
    t.ok(Number(saved) > 0, `the savings beside the spend: $${saved}`)
    t.equal(Number(saved), (first?.cost_nano ?? 0) / 1e9, 'what the hit would have cost: the call it was stored from')
    t.match(await page.textContent('#calls tbody'), /cache hit, saved/)
    t.equal(await page.$$eval('#calls tbody tr', (rows) => rows.length), 3)
    const byTag = await page.$$eval('#tags tbody tr', (rows) => rows.map((r) => [r.querySelector('th')?.textContent, r.querySelector('td')?.textContent]))
    t.same(byTag.map(([tag, calls]) => `${String(tag)} ${String(calls)}`).sort(), ['team-a 2', 'team-b 1'], 'spend by tag')
    t.equal(await page.$$eval('#dashboard svg', (s) => s.length), 3, 'three charts')
    t.match(await page.textContent('#quota'), /not charged to a prepaid balance/, 'the balance plugin is off here: nothing is charged, and the page says so')
    t.equal(await page.evaluate(() => sessionStorage.getItem('modelgate.apiKey')), KEY_A, 'the key is kept for the tab only')
    await page.screenshot({ path: fromRoot('test-output', 'screenshots', 'usage.png'), fullPage: true })
    await page.click('#signout')
    t.equal(await page.evaluate(() => sessionStorage.getItem('modelgate.apiKey')), null)
    await page.close()
  })

  t.test('another project\'s key sees none of these calls', async (t) => {
    const res = await fetch(`${base}/console/api/calls`, { headers: { authorization: `Bearer ${KEY_B.replace('-b-', '-z-')}` } })
    t.equal(res.status, 200)
    t.same((await res.json() as { data: unknown[] }).data, [])
  })

  t.test('the marketplace shows each model\'s kind and its prices in their units, and filters by kind', async (t) => {
    const kinds = await buildApp(testConfig({
      models: [
        { id: 'demo/chat', name: 'Chat', provider: 'demo', context_length: 8192, pricing: { input: 1, cached_input: 0.5, output: 2 } },
        { id: 'demo/embed', name: 'Embed', provider: 'demo', context_length: 8192, architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] }, pricing: { input: 0.02, output: 0 } },
        { id: 'demo/image', name: 'Image', provider: 'demo', context_length: 4096, max_output_tokens: 256, architecture: { input_modalities: ['text'], output_modalities: ['image'] }, pricing: { input: 5, output: 40 } },
        { id: 'demo/image-sized', name: 'Image sized', provider: 'demo', context_length: 4096, architecture: { input_modalities: ['text'], output_modalities: ['image'] }, pricing: { input: 5, output: 40, per_image: { default: 0.042, '1024x1536': 0.063 } } }
      ]
    }))
    await kinds.listen({ host: '127.0.0.1', port: 0 })
    t.teardown(() => kinds.close())
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    await page.goto(`http://127.0.0.1:${(kinds.server.address() as { port: number }).port}/console`)
    await page.waitForSelector('#models li')
    const chat = await page.textContent('[data-id="demo/chat"]') ?? ''
    t.match(chat, /Chat/)
    t.match(chat, /Cached input \/ 1M tokens\$0\.5/)
    const embed = await page.textContent('[data-id="demo/embed"]') ?? ''
    t.match(embed, /Embeddings/)
    t.match(embed, /Input \/ 1M tokens\$0\.02/)
    t.notMatch(embed, /Output|Cached/, 'an embedding is billed for its input alone')
    const image = await page.textContent('[data-id="demo/image"]') ?? ''
    t.match(image, /Image generation/)
    t.match(image, /Input \/ 1M tokens\$5/)
    t.match(image, /Output \/ 1M tokens\$40/)
    t.match(image, /Per image, at most \(256 output tokens\)\$0\.01024/, 'an image model billed by its tokens: what one image costs at most')
    const sized = await page.textContent('[data-id="demo/image-sized"]') ?? ''
    t.match(sized, /Per image\$0\.042/)
    t.match(sized, /Per image 1024x1536\$0\.063/)
    t.notMatch(sized, /at most/, 'a price per image is the price per image')
    // one wording of the token unit, whatever the kind
    const labels = await page.$$eval('#models dl.prices dt', (dts) => dts.map((d) => d.textContent ?? '').filter((l) => l.includes('1M')))
    t.ok(labels.length > 0 && labels.every((l) => l.endsWith('/ 1M tokens')), `every token price per "1M tokens": ${[...new Set(labels)].join(', ')}`)
    // a model that lists no parameters says so, and opens onto nothing
    t.match(embed, /Supported parameters: none listed/)
    t.equal(await page.$$eval('#models details', (ds) => ds.filter((d) => /^0 supported/.test(d.querySelector('summary')?.textContent ?? '')).length), 0, 'no "0 supported parameters" to open')
    await page.selectOption('#kind', 'embeddings')
    t.same(await page.$$eval('#models li', (els) => els.map((e) => e.getAttribute('data-id'))), ['demo/embed'], 'kind filter')
    await page.close()
  })

  t.test('readable on a phone: no horizontal scrolling at 375 px', async (t) => {
    const page = await browser.newPage({ viewport: { width: 375, height: 800 }, deviceScaleFactor: 2 })
    await page.goto(`${base}/console/`)
    await page.waitForSelector('#models li')
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
    t.ok(overflow <= 0, `no horizontal overflow (${overflow}px)`)
    await page.screenshot({ path: fromRoot('test-output', 'screenshots', 'marketplace-phone.png'), fullPage: false })
    await page.keyboard.press('Tab')
    await page.close()
  })
}
