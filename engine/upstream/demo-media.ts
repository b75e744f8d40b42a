import { crc32, deflateSync } from 'node:zlib'

// What the demo models compute that is not text: embedding vectors and small PNG images, both
// deterministic functions of their input, so that equal inputs give equal answers everywhere.
//
// A vector sums a pseudo-random direction per feature of the text (a random projection of its
// features, seeded by their hashes) and is normalized to length 1: each word (lower case, a plural's final s dropped, a few very common words left out)
// counts 1, and each of its character trigrams counts 0.5, so texts that share words, or forms of
// one word, point the same way and unrelated texts are nearly orthogonal (cosine similarity near
// 0). Token ids count as words of their own. A shorter `dimensions` keeps the first values and
// normalizes them again, as OpenAI's text-embedding-3 models shorten theirs.
//
// An image is a gradient whose two colours come from the prompt, with a disc for each of its
// first words (colour, place and size from the word), at most 64 pixels on its longer side, in
// the aspect ratio asked for; written as an 8-bit RGB PNG with node:zlib.

export const DEMO_DIMENSIONS = 256

/** FNV-1a, 32 bits. */
function fnv (text: string, seed = 0x811c9dc5): number {
  let h = seed
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

const STOP = new Set(['a', 'an', 'the', 'of', 'to', 'in', 'on', 'and', 'or', 'is', 'are', 'was', 'be', 'it', 'for', 'with', 'at', 'by', 'as', 'this', 'that'])

function words (text: string): string[] {
  const out: string[] = []
  for (const m of text.toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    let w = m[0]
    if (STOP.has(w)) continue
    if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1)
    out.push(w)
  }
  return out
}

/** Adds a feature's direction (pseudo-random values in [-1, 1] seeded by its hash: a random projection) times `weight`. */
function add (v: Float64Array, feature: string, weight: number): void {
  let x = fnv(feature) || 1
  for (let i = 0; i < v.length; i++) {
    // xorshift32
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    v[i] = (v[i] as number) + weight * ((x >>> 0) / 2147483648 - 1)
  }
}

function normalized (v: ArrayLike<number>): number[] {
  let sum = 0
  for (let i = 0; i < v.length; i++) sum += (v[i] as number) ** 2
  const norm = Math.sqrt(sum)
  return Array.from(v, (x) => norm === 0 ? 0 : x / norm)
}

/** The demo vector of a text or of token ids; `dimensions` at most DEMO_DIMENSIONS. */
export function demoVector (input: string | readonly number[], dimensions = DEMO_DIMENSIONS): number[] {
  const v = new Float64Array(DEMO_DIMENSIONS)
  if (typeof input === 'string') {
    for (const w of words(input)) {
      add(v, `w:${w}`, 1)
      const padded = `#${w}#`
      for (let i = 0; i + 3 <= padded.length; i++) add(v, `g:${padded.slice(i, i + 3)}`, 0.5)
    }
    // a text of stop words or punctuation alone still gets a direction of its own
    if (v.every((x) => x === 0)) add(v, `s:${input}`, 1)
  } else {
    for (const t of input) add(v, `t:${t}`, 1)
    if (input.length === 0) add(v, 't:', 1)
  }
  const full = normalized(v)
  return dimensions >= DEMO_DIMENSIONS ? full : normalized(full.slice(0, dimensions))
}

/** Cosine similarity of two vectors of one length. */
export function cosine (a: readonly number[], b: readonly number[]): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += (a[i] as number) * (b[i] as number)
    na += (a[i] as number) ** 2
    nb += (b[i] as number) ** 2
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

// ---------------------------------------------------------------------------------------------
// Images

const MAX_SIDE = 64

/** The pixel size of a demo image for an asked-for width and height: the aspect ratio kept, the longer side MAX_SIDE. */
export function demoImageSize (width: number, height: number): { width: number, height: number } {
  const w = width > 0 ? width : 1
  const h = height > 0 ? height : 1
  const scale = MAX_SIDE / Math.max(w, h)
  return { width: Math.max(1, Math.round(w * scale)), height: Math.max(1, Math.round(h * scale)) }
}

/** OpenAI's `size` (`1536x1024`; `auto` or absent: square) as a width and height. */
export function sizeOf (size: unknown): { width: number, height: number } {
  const m = typeof size === 'string' ? /^(\d{1,5})x(\d{1,5})$/.exec(size) : null
  return m === null ? { width: 1024, height: 1024 } : { width: Number(m[1]), height: Number(m[2]) }
}

/** Gemini's `aspectRatio` (`16:9`) as a width and height. */
export function ratioOf (ratio: unknown): { width: number, height: number } {
  const m = typeof ratio === 'string' ? /^(\d{1,3}):(\d{1,3})$/.exec(ratio) : null
  return m === null ? { width: 1, height: 1 } : { width: Number(m[1]), height: Number(m[2]) }
}

type Rgb = [number, number, number]
const colour = (h: number): Rgb => [h & 0xff, (h >>> 8) & 0xff, (h >>> 16) & 0xff]

function chunk (type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8)
  head.writeUInt32BE(data.length, 0)
  head.write(type, 4, 'latin1')
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(data, crc32(head.subarray(4))), 0)
  return Buffer.concat([head, data, crc])
}

/** A PNG drawn from `prompt` (`seed` varies the image among several of one call), about `width`×`height` scaled down. */
export function demoPng (prompt: string, width: number, height: number, seed = 0): Buffer {
  const size = demoImageSize(width, height)
  const base = fnv(`${seed}:${prompt}`)
  const top = colour(base)
  const bottom = colour(fnv(prompt, base))
  const discs = words(prompt).slice(0, 8).map((w, i) => {
    const h = fnv(`${seed}:${i}:${w}`)
    return { x: (h % 997) / 997 * size.width, y: ((h >>> 10) % 991) / 991 * size.height, r: 3 + ((h >>> 20) % 12) / 12 * Math.max(size.width, size.height) / 4, c: colour(fnv(w)) }
  })
  const row = 1 + size.width * 3
  const raw = Buffer.alloc(row * size.height)
  for (let y = 0; y < size.height; y++) {
    raw[y * row] = 0
    const t = size.height === 1 ? 0 : y / (size.height - 1)
    for (let x = 0; x < size.width; x++) {
      let px: Rgb = [0, 1, 2].map((k) => Math.round((top[k] as number) * (1 - t) + (bottom[k] as number) * t)) as Rgb
      for (const d of discs) if ((x - d.x) ** 2 + (y - d.y) ** 2 <= d.r ** 2) px = d.c
      raw.set(px, y * row + 1 + x * 3)
    }
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(size.width, 0)
  ihdr.writeUInt32BE(size.height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8) // 8 bits, RGB, deflate, no filter method beyond 0, no interlace
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))])
}
