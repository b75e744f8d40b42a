import { format, type Params } from '../errors.js'
import { de } from './de.js'
import { en, type Catalog, type MessageKey } from './en.js'
import { es } from './es.js'
import { fr } from './fr.js'
import { ja } from './ja.js'
import { ko } from './ko.js'
import { ptBR } from './pt-BR.js'
import { zhCN } from './zh-CN.js'
import { zhTW } from './zh-TW.js'

// Localized error messages: X-Locale first, then Accept-Language with its
// q-values, then English. Codes and types are never translated; only the message is.

export const CATALOGS = { en, 'zh-CN': zhCN, 'zh-TW': zhTW, ja, ko, es, fr, de, 'pt-BR': ptBR } satisfies Record<string, Catalog>
export type Locale = keyof typeof CATALOGS
export const LOCALES = Object.keys(CATALOGS) as Locale[]

// Lower-case tag → locale: each locale's own tag, and tags that name it by another spelling or a
// region of it. A Map, not a plain object: a client's tag such as `constructor` or `__proto__`
// must not find a property of Object.prototype.
const BY_LOWER = new Map<string, Locale>([
  ...LOCALES.map((l): [string, Locale] => [l.toLowerCase(), l]),
  ['zh', 'zh-CN'], ['zh-hans', 'zh-CN'], ['zh-sg', 'zh-CN'], ['zh-my', 'zh-CN'],
  ['zh-hant', 'zh-TW'], ['zh-hk', 'zh-TW'], ['zh-mo', 'zh-TW'],
  ['pt', 'pt-BR'], ['pt-pt', 'pt-BR']
])

/** A language tag → a supported locale, or undefined. `zh-Hant-TW` → zh-TW, `fr-CA` → fr. */
export function matchLocale (tag: string): Locale | undefined {
  const t = tag.trim().toLowerCase().replace(/_/g, '-')
  if (t === '') return undefined
  const exact = BY_LOWER.get(t)
  if (exact !== undefined) return exact
  const parts = t.split('-')
  for (let n = parts.length - 1; n >= 1; n--) {
    const prefix = parts.slice(0, n).join('-')
    const hit = BY_LOWER.get(prefix)
    if (hit !== undefined) return hit
  }
  return undefined
}

const parsed = new Map<string, Locale>()
const MAX_CACHED = 256

/** The best supported locale of an Accept-Language header ('en' when none fits). */
export function fromAcceptLanguage (header: string): Locale {
  const cached = parsed.get(header)
  if (cached !== undefined) return cached
  const ranges = header.split(',').map((part, i) => {
    const [tag = '', ...params] = part.split(';')
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)).find((m) => m !== null)
    const weight = q === undefined || q === null ? 1 : Number(q[1])
    return { tag: tag.trim(), q: Number.isFinite(weight) ? Math.min(weight, 1) : 0, i }
  }).filter((r) => r.tag !== '' && r.q > 0).sort((a, b) => b.q - a.q || a.i - b.i)
  let result: Locale = 'en'
  for (const r of ranges) {
    if (r.tag === '*') break
    const hit = matchLocale(r.tag)
    if (hit !== undefined) { result = hit; break }
  }
  if (parsed.size >= MAX_CACHED) parsed.clear()
  parsed.set(header, result)
  return result
}

export function negotiateLocale (xLocale: string | undefined, acceptLanguage: string | undefined): Locale {
  if (xLocale !== undefined) {
    const hit = matchLocale(xLocale)
    if (hit !== undefined) return hit
  }
  if (acceptLanguage !== undefined && acceptLanguage !== '') return fromAcceptLanguage(acceptLanguage)
  return 'en'
}

export function localize (locale: Locale, key: MessageKey, params: Params): string {
  return format(CATALOGS[locale][key], params)
}
