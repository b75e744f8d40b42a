import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP } from 'node:net'

// The rules for a URL a client puts in a request for the upstream to fetch (chat image_url and
// video_url, Messages image and document url sources). The gateway never fetches media itself;
// these rules keep a client from making the upstream's fetcher reach what only the operator's
// network can: loopback, private, link-local (cloud metadata) and other non-public addresses,
// internal names, and schemes other than http(s).
//
// A URL is judged on what the WHATWG parser makes of it (which turns 2130706433, 0x7f.1 and 127.1
// into 127.0.0.1), and must also be written so that no other parser can read another host out of
// it: no backslash, no whitespace or control character, no userinfo, no percent-escape in the
// host, and an IPv4 host written as the usual dotted quad.

/** `image`: a data: URI of an image is allowed besides http(s); `none`: http(s) only. */
export type DataUris = 'image' | 'none'

const DATA_IMAGE = /^data:image\/[a-z0-9][a-z0-9.+-]{0,126}[;,]/i
const HTTP_PREFIX = /^https?:\/\//i
// C0 controls, space, DEL and backslash: read differently by different URL parsers
// eslint-disable-next-line no-control-regex -- control characters are what this looks for
const AMBIGUOUS = /[\u0000-\u0020\u007f\\]/
// eslint-disable-next-line no-control-regex -- the ASCII range, written out
const NON_ASCII = /[^\u0000-\u007f]/

// Reserved for local or private use, or never resolvable on the public internet.
const INTERNAL_SUFFIXES = ['.localhost', '.local', '.internal', '.arpa', '.lan', '.localdomain', '.intranet', '.corp', '.home', '.private', '.test', '.invalid', '.onion']

const ipv4 = (a: number, b: number, c: number, d: number): number => ((a << 24) | (b << 16) | (c << 8) | d) >>> 0
const v4Range = (a: number, b: number, c: number, d: number, bits: number): [number, number] => [ipv4(a, b, c, d), bits]

// IPv4 ranges that are not public unicast (the IANA special-purpose registry, less the few
// anycast services in it that no one serves media from).
const BLOCKED_V4: Array<[number, number]> = [
  v4Range(0, 0, 0, 0, 8), // "this network"
  v4Range(10, 0, 0, 0, 8), // private
  v4Range(100, 64, 0, 0, 10), // carrier-grade NAT
  v4Range(127, 0, 0, 0, 8), // loopback
  v4Range(169, 254, 0, 0, 16), // link-local, cloud metadata
  v4Range(172, 16, 0, 0, 12), // private
  v4Range(192, 0, 0, 0, 24), // IETF protocol assignments
  v4Range(192, 0, 2, 0, 24), // documentation
  v4Range(192, 88, 99, 0, 24), // 6to4 relay anycast
  v4Range(192, 168, 0, 0, 16), // private
  v4Range(198, 18, 0, 0, 15), // benchmarking
  v4Range(198, 51, 100, 0, 24), // documentation
  v4Range(203, 0, 113, 0, 24), // documentation
  v4Range(224, 0, 0, 0, 4), // multicast
  v4Range(240, 0, 0, 0, 4) // reserved, broadcast
]

function parseIPv4 (s: string): number | undefined {
  const parts = s.split('.')
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return undefined
  const [a, b, c, d] = parts.map(Number) as [number, number, number, number]
  return ipv4(a, b, c, d)
}

function isPublicIPv4Value (v: number): boolean {
  return !BLOCKED_V4.some(([base, bits]) => (v >>> (32 - bits)) === (base >>> (32 - bits)))
}

/** The eight 16-bit groups of an IPv6 address in any notation (`::`, an IPv4 tail). */
function parseIPv6 (s: string): number[] | undefined {
  let text = s.toLowerCase()
  const tail = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (tail !== null) {
    const v4 = parseIPv4(tail[2] as string)
    if (v4 === undefined) return undefined
    text = `${tail[1] as string}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const groups = (part: string): number[] => part === '' ? [] : part.split(':').map((h) => /^[0-9a-f]{1,4}$/.test(h) ? parseInt(h, 16) : NaN)
  const head = groups(halves[0] as string)
  const rest = halves.length === 2 ? groups(halves[1] as string) : []
  const fill = 8 - head.length - rest.length
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined
  const all = [...head, ...new Array<number>(fill).fill(0), ...rest]
  return all.some(Number.isNaN) ? undefined : all
}

function isPublicIPv6Groups (g: number[]): boolean {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = g as [number, number, number, number, number, number, number, number]
  const embedded = ((g6 << 16) | g7) >>> 0
  const zeroTo = (n: number): boolean => g.slice(0, n).every((x) => x === 0)
  if (zeroTo(6)) return false // ::/96: unspecified, loopback, IPv4-compatible
  if (zeroTo(5) && g5 === 0xffff) return false // ::ffff:0:0/96, IPv4-mapped
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return false // ::ffff:0:0:0/96, IPv4-translated
  if (g0 === 0x64 && g1 === 0xff9b) {
    if (g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return isPublicIPv4Value(embedded) // NAT64 well-known prefix
    // 64:ff9b:1::/48 is NAT64 for local use only: it means something only inside the operator's
    // network, and the IPv4 address it carries may sit at any of the prefix lengths RFC 6052 allows
    if (g2 === 1) return false
  }
  if (g0 === 0x2002) return isPublicIPv4Value(((g1 << 16) | g2) >>> 0) // 6to4 carries an IPv4 address
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return false // discard-only
  if (g0 === 0x2001 && g1 < 0x200) return false // IETF special-purpose block: Teredo, benchmarking, ORCHID
  if (g0 === 0x2001 && g1 === 0xdb8) return false // documentation
  if ((g0 & 0xfff0) === 0x3ff0) return false // documentation 3fff::/20
  if ((g0 & 0xfe00) === 0xfc00) return false // unique local fc00::/7
  if ((g0 & 0xffc0) === 0xfe80) return false // link-local fe80::/10
  if ((g0 & 0xffc0) === 0xfec0) return false // site-local (deprecated) fec0::/10
  if ((g0 & 0xff00) === 0xff00) return false // multicast
  return true
}

/** Is this IP address (IPv4 or IPv6, any notation) a public unicast address? Not an IP: false. */
export function isPublicAddress (ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '')
  const family = isIP(bare)
  if (family === 4) {
    const v = parseIPv4(bare)
    return v !== undefined && isPublicIPv4Value(v)
  }
  if (family === 6) {
    const g = parseIPv6(bare)
    return g !== undefined && isPublicIPv6Groups(g)
  }
  return false
}

/** A host name (not an IP address) that only a local or private network can resolve. */
export function isInternalName (host: string): boolean {
  const name = host.toLowerCase().replace(/\.+$/, '')
  if (name === '' || name === 'localhost' || !name.includes('.')) return true
  return INTERNAL_SUFFIXES.some((s) => name.endsWith(s))
}

export type MediaUrlProblem =
  | 'not a string' | 'scheme not allowed' | 'ambiguous characters' | 'credentials' | 'escaped host'
  | 'not a URL' | 'blocked address' | 'internal name' | 'host not in canonical form'

/** A checked http(s) URL whose host is a name, for the optional DNS check. */
export interface NamedHost { host: string, kind: 'image' | 'video', field: string }

/**
 * Why a media URL must not be forwarded, or undefined when it may be. `named` receives the host
 * of an allowed URL when it is a DNS name (an IP literal or a data: URI needs no lookup).
 */
export function mediaUrlProblem (raw: unknown, dataUris: DataUris, named?: (host: string) => void): MediaUrlProblem | undefined {
  if (typeof raw !== 'string') return 'not a string'
  if (dataUris === 'image' && DATA_IMAGE.test(raw)) return undefined
  if (!HTTP_PREFIX.test(raw)) return 'scheme not allowed'
  if (AMBIGUOUS.test(raw)) return 'ambiguous characters'
  const authority = raw.slice(raw.indexOf('//') + 2).split(/[/?#]/, 1)[0] as string
  if (authority.includes('@')) return 'credentials'
  if (authority.includes('%')) return 'escaped host'
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'not a URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'scheme not allowed'
  if (url.username !== '' || url.password !== '') return 'credentials'
  const host = url.hostname
  const literal = host.startsWith('[') || isIP(host) === 4
  if (literal) {
    if (!isPublicAddress(host)) return 'blocked address'
  } else if (isInternalName(host)) {
    return 'internal name'
  }
  const rawHost = authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority.replace(/:\d*$/, '').toLowerCase()
  // an IPv4 host other than its dotted quad (2130706433, 0x7f.1, 127.1) may mean something else
  // to the upstream's parser; an internationalized name differs from its ASCII form, which is fine
  const canonical = rawHost === host || rawHost.startsWith('[') || (NON_ASCII.test(rawHost) && !literal)
  if (!canonical) return 'host not in canonical form'
  if (!literal) named?.(host)
  return undefined
}

export type Lookup = (host: string) => Promise<string[]>

const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * For `server.media_urls.resolve_hosts`: resolves the host names of media URLs that passed
 * mediaUrlProblem and returns the first host that does not resolve, or resolves to an address
 * that is not public (a public name pointed at 127.0.0.1). Off by default: the gateway does not
 * fetch the media, the upstream does, so this costs a lookup per distinct host per call and still
 * cannot see what the upstream's own resolver answers later (DNS rebinding). A failed or slow
 * lookup refuses the URL: what cannot be checked is not forwarded.
 */
export async function firstHostResolvingToBlockedAddress (hosts: NamedHost[], lookup: Lookup = systemLookup, timeoutMs = 2000): Promise<NamedHost | undefined> {
  const distinct = new Map<string, NamedHost>()
  for (const h of hosts) if (!distinct.has(h.host)) distinct.set(h.host, h)
  const verdicts = await Promise.all([...distinct.values()].map(async (h) => {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs) })
    try {
      const addresses = await Promise.race([lookup(h.host.replace(/\.+$/, '')), timeout])
      return addresses !== null && addresses.length > 0 && addresses.every(isPublicAddress) ? undefined : h
    } catch {
      return h
    } finally {
      clearTimeout(timer)
    }
  }))
  return verdicts.find((v) => v !== undefined)
}
