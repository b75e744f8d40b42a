// Small DOM helpers for the operator's console. Everything shown is set as text (never parsed as
// HTML), and no element gets a style attribute: the page's Content-Security-Policy allows no
// inline style, so sizes and colours go through classes or the CSSOM.

export const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const e = document.getElementById(id)
  if (e === null) throw new Error(`#${id} is missing`)
  return e as T
}

export const input = (id: string): HTMLInputElement => $<HTMLInputElement>(id)
export const select = (id: string): HTMLSelectElement => $<HTMLSelectElement>(id)

type Child = Node | string | null | undefined | false

/** An element with attributes (a `true` value: the attribute without a value) and children. */
export function el (tag: string, attrs: Record<string, string | boolean | undefined> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === true) e.setAttribute(k, '')
    else if (typeof v === 'string') e.setAttribute(k, v)
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c)
  return e
}

const ints = new Intl.NumberFormat('en-US')
export const int = (n: number): string => ints.format(n)
/** A USD amount of the API (an exact decimal string), as shown. */
export const usd = (s: string): string => `$${s}`
export const when = (iso: string | null): string => iso === null ? '—' : new Date(iso).toLocaleString()

/**
 * A message in an element: an alert (`role="alert"`) is hidden while empty; a status
 * (`role="status"`) stays in place, so that screen readers hear each new text.
 */
export function say (id: string, text: string): void {
  const e = $(id)
  e.textContent = text
  if (e.getAttribute('role') === 'alert') e.hidden = text === ''
}

/** The error of a request, as a sentence. */
export const problem = (err: unknown): string => err instanceof Error ? err.message : String(err)

/**
 * A table body's rows, or one row saying there is nothing. Each cell is labelled with its
 * column's heading (`data-label`), which a narrow screen shows beside it when the table's rows
 * become cards (`table.cards` in styles.css).
 */
export function fill (table: string, rows: HTMLElement[], empty: string): void {
  const body = $(table).querySelector('tbody') as HTMLElement
  const cols = $(table).querySelectorAll('thead th').length
  body.replaceChildren(...(rows.length > 0 ? label(table, rows) : [el('tr', {}, el('td', { colspan: String(cols), class: 'muted' }, empty))]))
}

/** Rows with each cell labelled with its column's heading (visible headings only). */
export function label (table: string, rows: HTMLElement[]): HTMLElement[] {
  const heads = [...$(table).querySelectorAll('thead th')].map((th) => th.querySelector('.sr-only') === null ? (th.textContent ?? '') : '')
  for (const row of rows) {
    for (const [i, cell] of [...row.children].entries()) if (heads[i] !== '' && !cell.hasAttribute('data-label')) cell.setAttribute('data-label', heads[i] ?? '')
  }
  return rows
}

/** Comma-separated words, trimmed, empty ones left out. */
export const words = (s: string): string[] => s.split(',').map((w) => w.trim()).filter((w) => w !== '')

/** A datetime-local value (the browser's time zone) as an ISO time, or undefined when empty. */
export function isoOf (local: string): string | undefined {
  if (local === '') return undefined
  const t = new Date(local)
  return Number.isNaN(t.getTime()) ? undefined : t.toISOString()
}

/** An ISO time as a datetime-local value in the browser's time zone. */
export function localOf (iso: string | null): string {
  if (iso === null) return ''
  const d = new Date(iso)
  const p = (n: number): string => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`
}

/** Runs `run` when the form `id` is submitted, instead of sending it anywhere. */
export function onSubmit (id: string, run: (form: HTMLFormElement) => unknown): void {
  $(id).addEventListener('submit', (e) => {
    e.preventDefault()
    void run(e.target as HTMLFormElement)
  })
}

/** Wires the buttons marked `data-close` of a dialog to close it. */
export function closers (dialog: HTMLDialogElement): void {
  for (const b of dialog.querySelectorAll('[data-close]')) b.addEventListener('click', () => dialog.close())
}
