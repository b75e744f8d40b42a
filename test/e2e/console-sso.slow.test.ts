import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createServer } from 'node:net'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { childEnv, KEY_A, testConfig } from '../helper.js'
import { CLIENT_ID, CLIENT_SECRET, startIdp, type Idp } from '../oidc-idp.js'

// Single sign-on in headless Chromium (Debian's /usr/bin/chromium via playwright-core): the
// browser goes from each console to a real OpenID provider (oidc-provider's own login page), signs
// in, and comes back signed in; the page says who and with which role, and shows only what the role
// may do. What the page did is checked through the admin API. Signing out goes on to the
// provider's logout page and back to the console, and the provider forgets the user too.

const CHROMIUM = '/usr/bin/chromium'
const ADMIN = 'console-sso-admin-token-0123456789'

/** A port nothing listens on now, for the gateway: the provider must know its callback before either starts. */
async function freePort (): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const port = (s.address() as { port: number }).port
  await new Promise((resolve) => s.close(resolve))
  return port
}

t.test('single sign-on in headless Chromium', { skip: existsSync(CHROMIUM) ? false : 'Chromium is not installed at /usr/bin/chromium (.ci/run installs it)' }, async (t) => {
  if (!existsSync(fromRoot('dist', 'console', 'admin', 'index.html'))) {
    execFileSync(process.execPath, [fromRoot('routes', 'console', 'build.mjs')], { cwd: fromRoot(), env: childEnv() })
  }
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const idp: Idp = await startIdp(t, [`${base}/console/auth/callback`], {
    ann: { email: 'ann@example.com', name: 'Ann', groups: ['platform-admins'] },
    fin: { email: 'fin@example.com', groups: ['finance'] },
    dev: { email: 'dev@example.com', groups: ['acme-devs'] }
  }, { postLogoutRedirectUris: [`${base}/console/admin/`] })
  const app: FastifyInstance = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    admin: { token: ADMIN },
    sso: {
      issuer: idp.issuer,
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_url: `${base}/console/auth/callback`,
      post_logout_redirect_url: `${base}/console/admin/`,
      scopes: ['openid', 'email', 'profile', 'groups'],
      roles: [{ group: 'platform-admins', role: 'admin' }, { group: 'finance', role: 'viewer' }, { group: 'acme-devs', role: 'org_admin', org: 'acme' }]
    }
  }), { logger: false })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port })
  // a call of acme, for the developer console's view
  await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'demo/gpt', messages: [{ role: 'user', content: 'hi' }] }) })
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] })
  t.teardown(async () => { await browser.close() })

  /** A fresh browser at `path`, signed in at the provider as `login` through the page's link. */
  const problems: string[] = []
  async function signIn (path: string, login: string): Promise<Page> {
    const context = await browser.newContext()
    const page = await context.newPage()
    page.on('pageerror', (e) => problems.push(`${path} as ${login}: ${e.message}`))
    page.on('console', (m) => { if (m.type() === 'error' && !/401|Failed to load resource/.test(m.text())) problems.push(`${path} as ${login}: ${m.text()}`) })
    // the developer console's sign-in is on its usage tab
    await page.goto(`${base}${path}${path === '/console/' ? '#usage' : ''}`)
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click()
    await page.waitForURL(`${idp.issuer}/**`)
    await page.locator('input[name="login"]').fill(login)
    await page.locator('input[name="password"]').fill('any')
    await page.locator('button[type="submit"]').click()
    await page.waitForURL(`${base}${path}**`)
    return page
  }

  await t.test('the operator\'s console as an admin: signed in, a change made through the page is signed by the user; signing out ends the session, here and at the provider', async (t) => {
    const page = await signIn('/console/admin/', 'ann')
    await page.locator('#whoami', { hasText: 'Signed in as ann@example.com · admin' }).waitFor()
    const cookie = (await page.context().cookies()).find((c) => c.name === 'mg_session')
    t.match(cookie, { httpOnly: true, sameSite: 'Lax', path: '/', secure: false }, 'the session cookie: HttpOnly, Lax, not Secure on loopback HTTP')
    t.equal(await page.evaluate(() => document.cookie.includes('mg_session')), false, 'the page\'s scripts cannot read it')
    await page.getByRole('tab', { name: 'Tenants' }).click()
    await page.locator('#org-id').fill('made-in-page')
    await page.getByRole('button', { name: 'Create organization' }).click()
    await page.locator('#orgs [data-org="made-in-page"]').waitFor()
    const audit = await (await fetch(`${base}/admin/v1/audit`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { data: Array<{ action: string, target: string, identity: unknown }> }
    t.match(audit.data.find((a) => a.action === 'org.create' && a.target === 'made-in-page'), { identity: { kind: 'sso', sub: 'ann', email: 'ann@example.com' } })
    for (const tab of ['Providers', 'Plugins']) t.ok(await page.getByRole('tab', { name: tab }).isVisible(), `${tab}: shown to an admin`)
    t.ok(await page.locator('#pl-reload').count() === 1)
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(`${idp.issuer}/session/end**`)
    const after = await fetch(`${base}/admin/v1/whoami`, { headers: { cookie: `mg_session=${cookie?.value ?? ''}` } })
    t.equal(after.status, 401, 'the session ended at the gateway, not only in the page, before the browser left for the provider')
    await page.getByRole('button', { name: 'Yes, sign me out' }).click()
    await page.waitForURL(`${base}/console/admin/**`)
    await page.locator('#signin-view').waitFor()
    t.pass('the provider sent the browser back to the console, signed out')
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click()
    await page.waitForURL(`${idp.issuer}/**`)
    await page.locator('input[name="login"]').waitFor()
    t.pass('the provider forgot the user too: signing in again asks for the login')
  })

  await t.test('the operator\'s console as a viewer: reads, and is shown no way to change anything', async (t) => {
    const page = await signIn('/console/admin/', 'fin')
    await page.locator('#whoami', { hasText: 'Signed in as fin@example.com · viewer' }).waitFor()
    await page.getByRole('tab', { name: 'Tenants' }).click()
    await page.locator('#orgs [data-org="acme"]').waitFor()
    for (const id of ['org-form', 'project-form', 'credits-form']) t.equal(await page.locator(`#${id}`).isVisible(), false, `#${id} hidden`)
    await page.getByRole('tab', { name: 'Keys' }).click()
    await page.locator('#keys tbody tr').first().waitFor()
    t.equal(await page.locator('#key-create').isVisible(), false, 'no key creation')
    t.equal(await page.locator('#keys [data-action]').count(), 0, 'no edit, rotate or revoke')
    await page.getByRole('tab', { name: 'Plugins' }).click()
    t.equal(await page.locator('#pl-reload').isVisible(), false, 'no reload')
    t.equal(await page.getByRole('tab', { name: 'Sessions' }).isVisible(), false, 'no sessions: they are an admin\'s')
    await page.getByRole('tab', { name: 'Tenants' }).focus()
    await page.keyboard.press('End')
    t.equal(await page.evaluate(() => document.querySelector('[role=tab][aria-selected=true]')?.id), 'tab-plugins', 'End: the last tab the role is shown, not a hidden one')
  })

  await t.test('the operator\'s console as an org_admin: its organization only; no providers, plugins or credits', async (t) => {
    const page = await signIn('/console/admin/', 'dev')
    await page.locator('#whoami', { hasText: 'Signed in as dev@example.com · org_admin of acme' }).waitFor()
    for (const tab of ['Providers', 'Plugins', 'Sessions']) t.equal(await page.getByRole('tab', { name: tab }).isVisible(), false, `${tab}: hidden`)
    await page.getByRole('tab', { name: 'Tenants' }).click()
    await page.locator('#orgs [data-org="acme"]').waitFor()
    t.equal(await page.locator('#orgs [data-org]').count(), 1, 'only acme is listed')
    t.equal(await page.locator('#project-form').isVisible(), true, 'projects may be made')
    for (const id of ['org-form', 'credits-form']) t.equal(await page.locator(`#${id}`).isVisible(), false, `#${id} hidden`)
    await page.getByRole('tab', { name: 'Keys' }).click()
    t.equal(await page.locator('#key-create').isVisible(), true, 'keys may be made')
  })

  await t.test('the operator\'s console as an admin: the sessions tab shows who is signed in, and ending a user\'s sessions signs them out', async (t) => {
    const viewer = await signIn('/console/admin/', 'fin')
    await viewer.locator('#whoami', { hasText: 'fin@example.com · viewer' }).waitFor()
    const page = await signIn('/console/admin/', 'ann')
    await page.locator('#whoami', { hasText: 'ann@example.com · admin' }).waitFor()
    await page.getByRole('tab', { name: 'Sessions' }).click()
    const own = page.locator('#sessions tr[data-sub="ann"]', { hasText: 'this session' })
    await own.waitFor()
    t.equal(await own.count(), 1, 'the admin\'s own session is marked')
    const fin = page.locator('#sessions tr[data-sub="fin"]')
    t.ok(await fin.count() >= 2, 'the viewer\'s sessions are listed (this one and the earlier one)')
    t.match(await fin.first().textContent(), /fin@example\.com.*viewer/s)
    await fin.first().getByRole('button', { name: 'End every session of fin@example.com' }).click()
    await page.locator('#ss-status', { hasText: 'session(s) of fin@example.com' }).waitFor()
    await page.locator('#sessions tr[data-sub="fin"]').first().waitFor({ state: 'detached' })
    t.ok(await own.isVisible(), 'the admin\'s own is still there')
    // the viewer's page finds out at its next call
    await viewer.getByRole('tab', { name: 'Keys' }).click()
    await viewer.locator('#signin-error', { hasText: 'Your session has ended' }).waitFor()
    t.ok(await viewer.locator('#signin-view').isVisible(), 'the viewer is signed out')
    const audit = await (await fetch(`${base}/admin/v1/audit`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { data: Array<{ action: string, target: string, identity: unknown }> }
    t.match(audit.data[0], { action: 'session.revoke', target: 'fin', identity: { kind: 'sso', sub: 'ann' } }, 'the end is audited, signed by the admin')
  })

  await t.test('the developer console takes a session: the projects the role reaches', async (t) => {
    const page = await signIn('/console/', 'dev')
    await page.locator('#who', { hasText: 'Signed in as dev@example.com · org_admin of acme' }).waitFor()
    t.same(await page.locator('#project option').allTextContents(), ['acme/web'], 'the projects of its organization only')
    await page.locator('#stats', { hasText: 'Calls' }).waitFor()
    t.match(await page.locator('#stats').textContent(), /Calls\s*1|1\s*Calls/, 'acme/web\'s call')
    const admin = await signIn('/console/', 'ann')
    await admin.locator('#who', { hasText: 'ann@example.com · admin' }).waitFor()
    t.same(await admin.locator('#project option').allTextContents(), ['acme/web', 'zeta/app'], 'an admin reaches every project')
    await admin.getByRole('button', { name: 'Sign out' }).click()
    await admin.waitForURL(`${idp.issuer}/session/end**`)
    t.pass('signing out of the developer console goes on to the provider\'s logout too')
  })

  t.same(problems, [], 'no script error on any page')
})
