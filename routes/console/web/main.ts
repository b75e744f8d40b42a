// The developer console: a marketplace of the catalog's models with their prices, and a project's
// usage once signed in with an API key (kept in sessionStorage, sent only to this gateway), or
// through single sign-on (the gateway's session cookie, HttpOnly), which shows any project of the
// organizations the operator's role reaches.

interface Rates { input: string, cached_input: string | null, output: string | null, cache_write: string | null, cache_write_1h: string | null, input_audio?: string | null, output_audio?: string | null }
interface Tier extends Rates { above_input_tokens: number }
interface Pricing {
  input: string,
  cached_input: string,
  cached_input_configured: boolean,
  output: string | null,
  cache_write: string | null,
  cache_write_1h: string | null,
  input_audio?: string | null,
  output_audio?: string | null,
  tiers: Tier[],
  per_request: string | null,
  per_image: Record<string, string> | null
  server_tools?: Record<string, string> | null
  /** An image model priced by tokens alone: the output tokens of one image at most, and what they cost. */
  image_output_max?: { tokens: number, usd: string } | null
}
type Kind = 'chat' | 'embeddings' | 'image'
interface Model { id: string, name: string, vendor: string, kind: Kind, context_length: number, input_modalities: string[], output_modalities: string[], supported_parameters: string[], pricing: Pricing | null }
interface Quota { limit: string, used: string, unit: string, per: string, resets_at: string }
interface Me { org: string, project: string, key: { name: string, hint: string } | null, balance_usd: string, held_usd: string, spent_usd: string, balance_charged: boolean, org_quota: Quota | null, project_quota: Quota | null }
interface Bucket { start: string, calls: number, prompt_tokens: number, cached_input_tokens: number, completion_tokens: number, cost_usd: string, saved_usd: string }
interface Usage { range: string, bucket_s: number, buckets: Bucket[], totals: Omit<Bucket, 'start'>, by_tag?: Array<{ tag: string | null, calls: number, cost_usd: string }> }
interface Call { created_at: string, model: string, endpoint: string, status: string, error?: string | null, stream: boolean, prompt_tokens: number, cached_input_tokens: number, completion_tokens: number, cost_usd: string, latency_ms: number, cache_hit: boolean, saved_usd: string }

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T
const KEY = 'modelgate.apiKey'
const API = `${(import.meta as unknown as { env: { BASE_URL: string } }).env.BASE_URL}api`

function el (tag: string, attrs: Record<string, string> = {}, ...children: Array<Node | string>): HTMLElement {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v)
  e.append(...children)
  return e
}

const fmtInt = new Intl.NumberFormat('en-US')
const context = (n: number): string => n >= 1_000_000 ? `${+(n / 1_000_000).toFixed(2)}M` : n >= 1000 ? `${Math.round(n / 1000)}K` : String(n)
const usd = (s: string): string => `$${s}`

// ---- tabs -------------------------------------------------------------------------------------
const tabs = [$('tab-market'), $('tab-usage')]
function select (tab: HTMLElement): void {
  for (const t of tabs) {
    const on = t === tab
    t.setAttribute('aria-selected', String(on))
    t.tabIndex = on ? 0 : -1
    $(t.getAttribute('aria-controls') as string).hidden = !on
  }
  history.replaceState(null, '', tab.id === 'tab-usage' ? '#usage' : '#marketplace')
  if (tab.id === 'tab-usage' && (sessionStorage.getItem(KEY) !== null || operator !== null)) void loadUsage()
}
tabs.forEach((t, i) => {
  t.addEventListener('click', () => select(t))
  t.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return
    const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length] as HTMLElement
    next.focus()
    select(next)
  })
})

// ---- quick start ------------------------------------------------------------------------------
// the gateway's own address, as the browser reached it; the MCP part when the gateway serves MCP tools
async function quickStart (firstModel: string | undefined): Promise<void> {
  const origin = location.origin
  for (const c of document.querySelectorAll<HTMLElement>('#quickstart code[data-url]')) c.textContent = origin + (c.dataset.url ?? '')
  $('qs-curl').textContent = [
    `curl ${origin}/v1/chat/completions \\`,
    '  -H "Authorization: Bearer $MODELGATE_KEY" -H "Content-Type: application/json" \\',
    `  -d '{"model": "${firstModel ?? 'MODEL'}", "messages": [{"role": "user", "content": "Hello"}]}'`
  ].join('\n')
  const res = await fetch(`${API}/endpoints`)
  if (!res.ok || (await res.json() as { mcp: string | null }).mcp === null) return
  $('qs-claude').textContent = `claude mcp add --transport http modelgate ${origin}/mcp --header "Authorization: Bearer $MODELGATE_KEY"`
  $('qs-json').textContent = JSON.stringify({ mcpServers: { modelgate: { type: 'http', url: `${origin}/mcp`, headers: { Authorization: 'Bearer YOUR_MODELGATE_KEY' } } } }, null, 2)
  $('qs-mcp').hidden = false
}

// ---- marketplace ------------------------------------------------------------------------------
let models: Model[] = []

const KINDS: Record<Kind, string> = { chat: 'Chat', embeddings: 'Embeddings', image: 'Image generation' }

/** A model's prices in their units: what a call of its kind is billed for. */
function card (m: Model): HTMLElement {
  const badges = el('div', { class: 'badges' },
    el('span', { class: 'badge kind' }, KINDS[m.kind]),
    ...m.input_modalities.map((x) => el('span', { class: 'badge' }, `in: ${x}`)),
    ...m.output_modalities.map((x) => el('span', { class: 'badge' }, `out: ${x}`)),
    el('span', { class: 'badge' }, `${context(m.context_length)} context`))
  const price = m.pricing === null ? [el('p', { class: 'noprice' }, 'No public price')] : prices(m, m.pricing)
  const n = m.supported_parameters.length
  const params = n === 0
    ? el('p', { class: 'params none' }, 'Supported parameters: none listed')
    : el('details', { class: 'params' }, el('summary', {}, `${n} supported parameter${n === 1 ? '' : 's'}`), el('p', {}, m.supported_parameters.join(', ')))
  return el('li', { class: 'card model', 'data-id': m.id }, el('h3', {}, m.name), el('div', { class: 'id' }, m.id), badges, ...price, params)
}

const rate = (label: string, value: string | null): HTMLElement[] => value === null ? [] : [el('div', {}, el('dt', {}, label), el('dd', {}, usd(value)))]

/**
 * The price sheet: token rates per million, cache writes and long-context tiers where set, per-call
 * and per-image prices. An embedding is billed for its input tokens alone; an image model for the
 * tokens its provider reports and its images.
 */
function prices (m: Model, p: Pricing): HTMLElement[] {
  const unit = '/ 1M tokens'
  const sheet = (r: Rates): HTMLElement[] => m.kind === 'embeddings'
    ? rate(`Input ${unit}`, r.input)
    : [...rate(`Input ${unit}`, r.input), ...(m.kind === 'chat' ? rate(`Cached input ${unit}`, r.cached_input) : []), ...rate(`Output ${unit}`, r.output),
        ...rate(`Cache write ${unit}`, r.cache_write), ...rate(`1h cache write ${unit}`, r.cache_write_1h),
        ...rate(`Audio input ${unit}`, r.input_audio ?? null), ...rate(`Audio output ${unit}`, r.output_audio ?? null)]
  const out = [el('dl', { class: 'prices', 'aria-label': 'Price per million tokens' }, ...sheet(p))]
  for (const t of p.tiers) {
    out.push(el('dl', { class: 'prices tier', 'aria-label': `Price per million tokens above ${t.above_input_tokens} input tokens` },
      el('div', { class: 'tier-name' }, el('dt', {}, 'Prompts over'), el('dd', {}, `${context(t.above_input_tokens)} tokens`)),
      ...sheet(t)))
  }
  const units = [...rate('Per request', p.per_request), ...Object.entries(p.per_image ?? {}).flatMap(([size, v]) => rate(size === 'default' ? 'Per image' : `Per image ${size}`, v)),
    ...Object.entries(p.server_tools ?? {}).flatMap(([kind, v]) => rate(`Per ${kind.replace(/_/g, ' ')}`, v))]
  // an image model billed by its tokens alone: what one image costs at most, its output tokens at the output rate
  if (p.per_image === null && p.image_output_max !== null && p.image_output_max !== undefined) {
    units.push(el('div', {}, el('dt', {}, `Per image, at most (${fmtInt.format(p.image_output_max.tokens)} output tokens)`), el('dd', {}, usd(p.image_output_max.usd))))
  }
  if (units.length > 0) out.push(el('dl', { class: 'prices units', 'aria-label': 'Prices per request, per image and per tool use' }, ...units))
  return out
}

function renderModels (): void {
  const q = ($<HTMLInputElement>('q').value).trim().toLowerCase()
  const vendor = $<HTMLSelectElement>('vendor').value
  const modality = $<HTMLSelectElement>('modality').value
  const kind = $<HTMLSelectElement>('kind').value
  const sort = $<HTMLSelectElement>('sort').value
  const price = (m: Model): number => m.pricing === null ? Number.NaN : Number(m.pricing.input)
  const list = models
    .filter((m) => q === '' || m.name.toLowerCase().includes(q) || m.id.toLowerCase().includes(q))
    .filter((m) => vendor === '' || m.vendor === vendor)
    .filter((m) => modality === '' || m.input_modalities.includes(modality))
    .filter((m) => kind === '' || m.kind === kind)
    .sort((a, b) => {
      if (sort === 'price-asc' || sort === 'price-desc') {
        const pa = price(a); const pb = price(b)
        if (Number.isNaN(pa) || Number.isNaN(pb)) return Number.isNaN(pa) ? (Number.isNaN(pb) ? 0 : 1) : -1 // no price last
        return sort === 'price-asc' ? pa - pb : pb - pa
      }
      if (sort === 'context-desc') return b.context_length - a.context_length
      if (sort === 'context-asc') return a.context_length - b.context_length
      return a.name.localeCompare(b.name)
    })
  $('models').replaceChildren(...list.map(card))
  $('count').textContent = `${list.length} of ${models.length} models`
}

async function loadModels (): Promise<void> {
  const res = await fetch(`${API}/models`)
  models = ((await res.json()) as { data: Model[] }).data
  const fill = (id: string, values: string[]): void => {
    for (const v of [...new Set(values)].sort()) $(id).append(el('option', { value: v }, v))
  }
  fill('vendor', models.map((m) => m.vendor))
  fill('modality', models.flatMap((m) => m.input_modalities))
  for (const k of Object.keys(KINDS) as Kind[]) if (models.some((m) => m.kind === k)) $('kind').append(el('option', { value: k }, KINDS[k]))
  renderModels()
  await quickStart(models[0]?.id)
}
for (const id of ['q', 'vendor', 'modality', 'kind', 'sort']) $(id).addEventListener('input', renderModels)
$('filters').addEventListener('submit', (e) => e.preventDefault())

// ---- usage ------------------------------------------------------------------------------------
/** Signed in through single sign-on: who, the CSRF token its logout carries, and the project shown. */
interface Operator { who: string, csrf: string, project: string }
let operator: Operator | null = null

async function api<T> (path: string): Promise<T> {
  const key = sessionStorage.getItem(KEY)
  let url = `${API}${path}`
  // an operator names the project; an API key shows its own
  if (key === null && operator !== null && operator.project !== '') {
    const [org, project] = operator.project.split('/') as [string, string]
    url += `${path.includes('?') ? '&' : '?'}${new URLSearchParams({ org, project }).toString()}`
  }
  const res = await fetch(url, key === null ? { credentials: 'same-origin' } : { headers: { authorization: `Bearer ${key}` }, credentials: 'omit' })
  const body = await res.json() as T & { error?: { message: string } }
  if (!res.ok) throw Object.assign(new Error(body.error?.message ?? `HTTP ${res.status}`), { status: res.status })
  return body
}

/** A console session, when there is one: who is signed in and the projects the role reaches. */
async function openSession (): Promise<boolean> {
  try {
    const [who, projects] = await Promise.all([
      fetch('/admin/v1/whoami', { credentials: 'same-origin' }).then(async (r) => r.ok ? await r.json() as { email: string | null, name: string | null, sub: string, role: string, org: string | null, csrf_token: string } : null),
      fetch(`${API}/projects`, { credentials: 'same-origin' }).then(async (r) => r.ok ? await r.json() as { data: Array<{ org: string, project: string }> } : null)
    ])
    if (who === null || projects === null) return false
    const names = projects.data.map((p) => `${p.org}/${p.project}`)
    $<HTMLSelectElement>('project').replaceChildren(...names.map((n) => el('option', { value: n }, n)))
    operator = { who: `${who.email ?? who.name ?? who.sub} · ${who.role === 'org_admin' ? `org_admin of ${who.org ?? ''}` : who.role}`, csrf: who.csrf_token, project: names[0] ?? '' }
    $('project-pick').hidden = false
    return true
  } catch {
    return false
  }
}

const CHART_HEIGHT = 220

/** A bar chart (stacked when several series) as SVG, with a title and a text alternative. */
function chart (target: HTMLElement, title: string, labels: string[], series: Array<{ name: string, values: number[], color: string }>, format: (n: number) => string): SVGSVGElement {
  // drawn at the size it is shown (its figure's width, CHART_HEIGHT), so that its labels keep their font size
  const W = Math.max(200, target.getBoundingClientRect().width); const H = CHART_HEIGHT; const L = 64; const B = 26; const T = 10
  const totals = labels.map((_, i) => series.reduce((s, x) => s + (x.values[i] ?? 0), 0))
  const max = Math.max(1e-12, ...totals)
  const ns = 'http://www.w3.org/2000/svg'
  const svg = document.createElementNS(ns, 'svg')
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`)
  svg.setAttribute('height', String(H))
  svg.setAttribute('role', 'img')
  const t = document.createElementNS(ns, 'title')
  t.textContent = `${title}: total ${format(totals.reduce((a, b) => a + b, 0))} over ${labels.length} periods`
  svg.append(t)
  const add = (tag: string, attrs: Record<string, string | number>, text?: string): void => {
    const e = document.createElementNS(ns, tag)
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v))
    if (text !== undefined) e.textContent = text
    svg.append(e)
  }
  for (const f of [0, 0.5, 1]) {
    const y = T + (H - B - T) * (1 - f)
    add('line', { x1: L, x2: W, y1: y, y2: y, stroke: 'currentColor', 'stroke-opacity': 0.15 })
    add('text', { x: L - 6, y: y + 4, 'text-anchor': 'end' }, format(max * f))
  }
  const bw = (W - L) / Math.max(1, labels.length)
  labels.forEach((label, i) => {
    let y = H - B
    for (const s of series) {
      const h = ((s.values[i] ?? 0) / max) * (H - B - T)
      if (h > 0) add('rect', { x: L + i * bw + bw * 0.15, y: y - h, width: bw * 0.7, height: h, fill: s.color, rx: 1.5 })
      y -= h
    }
    if (labels.length <= 12 || i % Math.ceil(labels.length / 8) === 0) add('text', { x: L + i * bw + bw / 2, y: H - 6, 'text-anchor': 'middle' }, label)
  })
  return svg
}

/** A figure and its label; the figure is never cut or broken: its size shrinks to fit its tile (its length in --chars). */
function stat (label: string, value: string): HTMLElement {
  const v = el('div', { class: 'v' }, value)
  v.style.setProperty('--chars', String(value.length))
  return el('div', { class: 'stat' }, v, el('div', { class: 'l' }, label))
}

function quotaView (name: string, q: Quota | null): HTMLElement {
  if (q === null) return el('p', { class: 'muted' }, `${name}: no quota`)
  const pct = Math.min(100, (Number(q.used) / Math.max(Number(q.limit), 1e-12)) * 100)
  const unit = q.unit === 'usd' ? 'USD' : 'tokens'
  // the width through the CSSOM: the page's CSP (style-src 'self') refuses a style attribute
  const fill = el('span', {})
  fill.style.width = `${pct}%`
  return el('div', {},
    el('p', {}, `${name}: ${q.used} of ${q.limit} ${unit} per ${q.per} (resets ${new Date(q.resets_at).toLocaleString()})`),
    el('div', { class: 'meter', role: 'progressbar', 'aria-label': `${name} quota used`, 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': String(Math.round(pct)) }, fill))
}

async function loadUsage (): Promise<void> {
  const range = $<HTMLSelectElement>('range').value
  try {
    const [me, usage, calls] = await Promise.all([api<Me>('/me'), api<Usage>(`/usage?range=${range}`), api<{ data: Call[] }>('/calls?limit=25')])
    $('signin').hidden = true
    $('dashboard').hidden = false
    $('who').textContent = me.key === null || operator !== null
      ? `Signed in as ${operator?.who ?? ''}`
      : `Project ${me.org}/${me.project} · key ${me.key.name || me.key.hint}`
    const t = usage.totals
    $('stats').replaceChildren(
      stat('Calls', fmtInt.format(t.calls)), stat('Input tokens', fmtInt.format(t.prompt_tokens)), stat('Cached input tokens', fmtInt.format(t.cached_input_tokens)),
      stat('Output tokens', fmtInt.format(t.completion_tokens)), stat('Spend', usd(t.cost_usd)), stat('Saved by the cache', usd(t.saved_usd)), stat('Balance', me.balance_charged ? usd(me.balance_usd) : 'not charged'))
    const labels = usage.buckets.map((b) => usage.bucket_s < 86_400 ? new Date(b.start).getHours().toString().padStart(2, '0') + 'h' : new Date(b.start).toLocaleDateString(undefined, { month: 'short', day: 'numeric' }))
    const css = getComputedStyle(document.documentElement)
    const color = (v: string): string => css.getPropertyValue(v).trim()
    const draw = (id: string, make: (target: HTMLElement) => SVGSVGElement): void => { $(id).replaceChildren(make($(id))) }
    draw('chart-calls', (t) => chart(t, 'Calls', labels, [{ name: 'calls', values: usage.buckets.map((b) => b.calls), color: color('--in') }], (n) => fmtInt.format(Math.round(n))))
    draw('chart-tokens', (t) => chart(t, 'Tokens', labels, [
      { name: 'input', values: usage.buckets.map((b) => b.prompt_tokens - b.cached_input_tokens), color: color('--in') },
      { name: 'cached input', values: usage.buckets.map((b) => b.cached_input_tokens), color: color('--cached') },
      { name: 'output', values: usage.buckets.map((b) => b.completion_tokens), color: color('--out') }
    ], (n) => n >= 1000 ? `${+(n / 1000).toFixed(1)}k` : String(Math.round(n))))
    draw('chart-spend', (t) => chart(t, 'Spend', labels, [{ name: 'spend', values: usage.buckets.map((b) => Number(b.cost_usd)), color: color('--out') }], (n) => `$${n < 0.01 ? n.toPrecision(2) : n.toFixed(2)}`))
    $('quota').replaceChildren(
      me.balance_charged
        ? el('p', {}, `Balance ${usd(me.balance_usd)} · held ${usd(me.held_usd)} · spent ${usd(me.spent_usd)}`)
        : el('p', { id: 'balance-off', class: 'muted' }, 'Calls are not charged to a prepaid balance on this gateway (its balance plugin is off): the spend above is what the calls cost at the catalog\'s prices.'),
      quotaView('Organization', me.org_quota), quotaView('Project', me.project_quota))
    const rows = calls.data.map((c) => el('tr', {},
      el('td', {}, new Date(c.created_at).toLocaleString()), el('td', {}, c.model), el('td', {}, c.endpoint + (c.stream ? ' (stream)' : '')), el('td', {}, typeof c.error === 'string' ? `${c.status} (${c.error})` : c.status),
      el('td', { class: 'num' }, fmtInt.format(c.prompt_tokens)), el('td', { class: 'num' }, fmtInt.format(c.cached_input_tokens)), el('td', { class: 'num' }, fmtInt.format(c.completion_tokens)),
      el('td', { class: 'num' }, c.cache_hit ? `${c.cost_usd} (cache hit, saved ${c.saved_usd})` : c.cost_usd), el('td', { class: 'num' }, `${c.latency_ms} ms`)))
    // spend by tag over the range: a call counts under each of its tags; untagged calls together
    const tagRows = [...(usage.by_tag ?? [])].sort((a, b) => Number(b.cost_usd) - Number(a.cost_usd) || b.calls - a.calls)
      .map((r) => el('tr', {}, el('th', { scope: 'row' }, r.tag ?? 'untagged'), el('td', { class: 'num' }, fmtInt.format(r.calls)), el('td', { class: 'num' }, usd(r.cost_usd))))
    const tagBody = $('tags').querySelector('tbody') as HTMLElement
    tagBody.replaceChildren(...(tagRows.length > 0 ? tagRows : [el('tr', {}, el('td', { colspan: '3', class: 'muted' }, 'No calls in this range.'))]))
    const body = $('calls').querySelector('tbody') as HTMLElement
    body.replaceChildren(...(rows.length > 0 ? rows : [el('tr', {}, el('td', { colspan: '9', class: 'muted' }, 'No calls yet.'))]))
  } catch (err) {
    const status = (err as { status?: number }).status
    const asOperator = sessionStorage.getItem(KEY) === null && operator !== null
    sessionStorage.removeItem(KEY)
    if (status === 401) { operator = null; $('project-pick').hidden = true }
    $('dashboard').hidden = true
    $('signin').hidden = false
    const msg = $('signin-error')
    msg.hidden = false
    msg.textContent = status === 401
      ? (asOperator ? 'Your session has ended: sign in again.' : 'That API key was not accepted. Check it and try again.')
      : operator !== null && operator.project === ''
        ? 'Your role reaches no project yet.'
        : `Could not load usage: ${(err as Error).message}`
  }
}

$('signin').addEventListener('submit', (e) => {
  e.preventDefault()
  const key = $<HTMLInputElement>('apikey').value.trim()
  if (key === '') return
  sessionStorage.setItem(KEY, key)
  $('signin-error').hidden = true
  $<HTMLInputElement>('apikey').value = ''
  void loadUsage()
})
$('signout').addEventListener('click', () => {
  // a console session ends at the gateway, for both consoles
  // and at the identity provider, when it offers that: the browser goes there next
  if (sessionStorage.getItem(KEY) === null && operator !== null) {
    void fetch('/console/auth/logout', { method: 'POST', credentials: 'same-origin', headers: { 'x-csrf-token': operator.csrf } })
      .then(async (res) => res.ok ? (await res.json() as { end_session_url?: string | null }).end_session_url : null)
      .then((to) => { if (typeof to === 'string') location.assign(to) })
      .catch(() => {})
  }
  operator = null
  $('project-pick').hidden = true
  sessionStorage.removeItem(KEY)
  $('dashboard').hidden = true
  $('signin').hidden = false
  $<HTMLInputElement>('apikey').focus()
})
$('refresh').addEventListener('click', () => { void loadUsage() })
$('range').addEventListener('input', () => { void loadUsage() })
$('project').addEventListener('input', () => {
  if (operator !== null) operator.project = $<HTMLSelectElement>('project').value
  void loadUsage()
})

void loadModels()
void (async () => {
  // single sign-on offered: its link, and a session that may be open already (back from the provider)
  const sso = await fetch('/console/auth/status').then(async (r) => r.ok ? (await r.json() as { sso: boolean }).sso : false, () => false)
  $('sso').hidden = !sso
  if (sso && sessionStorage.getItem(KEY) === null && await openSession()) {
    select($('tab-usage'))
    return
  }
  if (location.hash === '#usage') select($('tab-usage'))
})()
