import { lookup as dnsLookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'

// Where a webhook may be sent. The operator's own receiver may well be on loopback or a private
// network, so those are allowed; what no receiver is, and what a webhook must never reach, are
// link-local addresses, which hold the cloud metadata services: 169.254.0.0/16 (IPv4, and
// IPv4-mapped IPv6), fe80::/10, and AWS's fd00:ec2::254. Checked when the config is checked (a
// literal address) and again at send time on the addresses the host resolves to.

const BLOCKED = new BlockList()
BLOCKED.addSubnet('169.254.0.0', 16, 'ipv4')
BLOCKED.addSubnet('::ffff:169.254.0.0', 112, 'ipv6')
BLOCKED.addSubnet('fe80::', 10, 'ipv6')
BLOCKED.addAddress('fd00:ec2::254', 'ipv6')

/** Is this IP address one a webhook must not reach? */
export function isBlockedWebhookAddress (ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '')
  const family = isIP(bare)
  if (family === 0) return false
  return BLOCKED.check(bare, family === 4 ? 'ipv4' : 'ipv6')
}

/** Why `raw` cannot be a webhook URL (config check), or undefined. */
export function webhookUrlProblem (raw: string): string | undefined {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'must be a URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL'
  if (url.username !== '' || url.password !== '') return 'must not hold credentials'
  if (isBlockedWebhookAddress(url.hostname)) return 'must not point at a link-local or cloud metadata address'
  return undefined
}

export type Lookup = (host: string) => Promise<string[]>

const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * The address to send to: the host's first address once every address it resolves to is
 * allowed; throws naming the problem otherwise. A literal address is checked as it is.
 */
export async function webhookAddress (url: URL, lookup: Lookup = systemLookup): Promise<string> {
  const host = url.hostname.replace(/^\[|\]$/g, '')
  const addresses = isIP(host) === 0 ? await lookup(host) : [host]
  if (addresses.length === 0) throw new Error(`${host} does not resolve`)
  const blocked = addresses.find(isBlockedWebhookAddress)
  if (blocked !== undefined) throw new Error(`${host} resolves to ${blocked}, a link-local or cloud metadata address`)
  return addresses[0] as string
}
