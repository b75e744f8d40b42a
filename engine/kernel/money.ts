// Money is an integer number of nano-dollars (1e-9 USD) from the config loader to the API, where
// it becomes a decimal string. JS numbers hold integers exactly up to 2^53,
// about 9 million dollars in nano-dollars, per value.

export const NANO_PER_USD = 1_000_000_000

/** USD (a config or API number) to nano-dollars, rounded to the nearest nano-dollar. */
export function usdToNano (usd: number): number {
  return Math.round(usd * NANO_PER_USD)
}

/** Parses a decimal USD string ("12.5", "-0.000000001") exactly; undefined when it is not one. */
export function parseUsd (text: string): number | undefined {
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?$/.exec(text.trim())
  if (m === null) return undefined
  const nano = Number(m[2]) * NANO_PER_USD + Number((m[3] ?? '').padEnd(9, '0'))
  return m[1] === '-' ? -nano : nano
}

/** Nano-dollars as an exact decimal string: 1500000000 → "1.5", 25 → "0.000000025" (a bigint sum too, however large). */
export function nanoToUsd (nano: number | bigint): string {
  const sign = nano < 0 ? '-' : ''
  let whole: string
  let rest: string
  if (typeof nano === 'bigint') {
    const abs = nano < 0n ? -nano : nano
    whole = String(abs / 1_000_000_000n)
    rest = String(abs % 1_000_000_000n)
  } else {
    const abs = Math.abs(nano)
    whole = String(Math.floor(abs / NANO_PER_USD))
    rest = String(abs % NANO_PER_USD)
  }
  const frac = rest.padStart(9, '0').replace(/0+$/, '')
  return sign + whole + (frac === '' ? '' : '.' + frac)
}

/** Price in USD per million tokens → nano-dollars per token (prices have at most 3 decimals). */
export function pricePerToken (usdPerMillion: number): number {
  return Math.round(usdPerMillion * 1000)
}
