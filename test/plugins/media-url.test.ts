import t from 'tap'
import { firstHostResolvingToBlockedAddress, isPublicAddress, mediaUrlProblem, type DataUris } from '../../engine/gateway/media-url.js'

// [url, allowed as a chat image_url, allowed where data: URIs are not (video_url, Messages url source)]
const TABLE: Array<[string, boolean, boolean]> = [
  // public http(s)
  ['https://example.com/cat.png', true, true],
  ['http://example.com/cat.png', true, true],
  ['HTTPS://Example.COM/Cat.png', true, true],
  ['https://example.com:8443/a.png?x=1#y', true, true],
  ['https://example.com./a.png', true, true],
  ['https://cdn.images.example.org/a/b/c.jpg', true, true],
  ['https://8.8.8.8/a.png', true, true],
  ['https://[2606:4700:4700::1111]/a.png', true, true],
  ['https://[2001:4860:4860:0:0:0:0:8888]/a.png', true, true],
  ['https://[64:ff9b::808:808]/a.png', true, true], // NAT64 of 8.8.8.8
  ['https://[2002:808:808::1]/a.png', true, true], // 6to4 of 8.8.8.8
  ['https://bücher.example.com/a.png', true, true],
  ['https://100.63.255.255/a.png', true, true], // just below carrier-grade NAT
  ['https://172.32.0.1/a.png', true, true], // just above 172.16/12
  ['https://example.com/path%20with%20escapes.png', true, true],
  // data: URIs
  ['data:image/png;base64,iVBORw0KGgo=', true, false],
  ['DATA:image/jpeg;base64,/9j/4AAQ', true, false],
  ['data:image/svg+xml,%3Csvg%3E', true, false],
  ['data:text/html;base64,PHNjcmlwdD4=', false, false],
  ['data:,hello', false, false],
  ['data:image/;base64,AAAA', false, false],
  // other schemes
  ['file:///etc/passwd', false, false],
  ['gopher://example.com/_x', false, false],
  ['javascript:alert(1)', false, false],
  ['ftp://example.com/a.png', false, false],
  ['blob:https://example.com/0b0b', false, false],
  ['ws://example.com/a', false, false],
  ['//example.com/a.png', false, false],
  ['example.com/a.png', false, false],
  ['http:/example.com/a.png', false, false],
  ['http:example.com/a.png', false, false],
  ['', false, false],
  ['file-abc123', false, false],
  // credentials and ambiguous spellings
  ['https://user:pass@example.com/a.png', false, false],
  ['https://user@example.com/a.png', false, false],
  ['https://example.com@127.0.0.1/a.png', false, false],
  ['http://example.com\\@127.0.0.1/', false, false],
  ['http:\\\\127.0.0.1/', false, false],
  [' https://example.com/a.png', false, false],
  ['https://example.com/a b.png', false, false],
  ['https://exa\tmple.com/a.png', false, false],
  ['http://%31%32%37.0.0.1/', false, false],
  ['http://a%2eb.com/', false, false],
  ['https://example.com:99999/', false, false],
  // IPv4: loopback, private, link-local, CGNAT, this network, multicast, reserved
  ['http://127.0.0.1/', false, false],
  ['http://127.255.255.254:8080/', false, false],
  ['http://10.0.0.1/', false, false],
  ['http://172.16.0.1/', false, false],
  ['http://172.31.255.255/', false, false],
  ['http://192.168.1.1/', false, false],
  ['http://169.254.169.254/latest/meta-data/', false, false],
  ['http://100.64.0.1/', false, false],
  ['http://100.127.255.255/', false, false],
  ['http://0.0.0.0/', false, false],
  ['http://0.1.2.3/', false, false],
  ['http://224.0.0.1/', false, false],
  ['http://239.255.255.250/', false, false],
  ['http://240.0.0.1/', false, false],
  ['http://255.255.255.255/', false, false],
  ['http://192.0.2.1/', false, false],
  ['http://198.18.0.1/', false, false],
  // IPv4 forms the URL parser normalizes
  ['http://2130706433/', false, false],
  ['http://0177.0.0.1/', false, false],
  ['http://0x7f.0.0.1/', false, false],
  ['http://0x7f000001/', false, false],
  ['http://127.1/', false, false],
  ['http://0/', false, false],
  ['http://017700000001/', false, false],
  ['http://3232235777/', false, false], // 192.168.1.1
  ['http://2852039166/', false, false], // 169.254.169.254
  ['http://134744072/', false, false], // 8.8.8.8, but not written as a dotted quad
  ['http://１２７.０.０.１/', false, false], // full-width digits
  // IPv6
  ['http://[::1]/', false, false],
  ['http://[::]/', false, false],
  ['http://[0:0:0:0:0:0:0:1]/', false, false],
  ['http://[::127.0.0.1]/', false, false],
  ['http://[::7f00:1]/', false, false],
  ['http://[::8.8.8.8]/', false, false], // IPv4-compatible: blocked whatever it embeds
  ['http://[::ffff:127.0.0.1]/', false, false],
  ['http://[::ffff:7f00:1]/', false, false],
  ['http://[0:0:0:0:0:ffff:127.0.0.1]/', false, false],
  ['http://[::ffff:169.254.169.254]/', false, false],
  ['http://[::ffff:a9fe:a9fe]/', false, false],
  ['http://[::ffff:8.8.8.8]/', false, false], // IPv4-mapped: blocked whatever it embeds
  ['http://[::ffff:0:7f00:1]/', false, false], // IPv4-translated
  ['http://[64:ff9b::127.0.0.1]/', false, false],
  ['http://[64:ff9b::a9fe:a9fe]/', false, false],
  ['http://[64:ff9b::10.0.0.1]/', false, false],
  ['http://[64:ff9b:1::808:808]/', false, false], // local-use NAT64
  ['http://[2002:7f00:1::]/', false, false], // 6to4 of 127.0.0.1
  ['http://[fc00::1]/', false, false],
  ['http://[fd12:3456:789a::1]/', false, false],
  ['http://[fe80::1]/', false, false],
  ['http://[febf::1]/', false, false],
  ['http://[fec0::1]/', false, false],
  ['http://[ff02::1]/', false, false],
  ['http://[2001:db8::1]/', false, false],
  ['http://[2001::1]/', false, false], // Teredo
  ['http://[100::1]/', false, false],
  ['http://[fe80::1%25eth0]/', false, false],
  // internal names
  ['http://localhost/', false, false],
  ['http://LOCALHOST./', false, false],
  ['http://localhost:11434/api', false, false],
  ['http://app.localhost/', false, false],
  ['http://printer.local/', false, false],
  ['http://metadata.google.internal/computeMetadata/v1/', false, false],
  ['http://router.home.arpa/', false, false],
  ['http://nas.lan/', false, false],
  ['http://intranet/', false, false],
  ['http://metadata/', false, false],
  ['http://1.0.0.127.in-addr.arpa/', false, false],
  ['http://exa_mple/', false, false]
]

t.test('the URL table', async (t) => {
  t.ok(TABLE.length >= 60, `${TABLE.length} forms`)
  for (const [url, asImage, strict] of TABLE) {
    const check = (dataUris: DataUris, want: boolean): void => {
      const problem = mediaUrlProblem(url, dataUris)
      t.equal(problem === undefined, want, `${dataUris === 'image' ? 'image_url' : 'video_url / url source'} ${JSON.stringify(url)}: ${problem ?? 'allowed'}`)
    }
    check('image', asImage)
    check('none', strict)
  }
})

t.test('not a string is refused', async (t) => {
  for (const v of [undefined, null, 1, {}, ['https://example.com/a.png']]) t.equal(mediaUrlProblem(v, 'image'), 'not a string')
})

t.test('the host name of an allowed URL is reported for the DNS check; IP literals and data: are not', async (t) => {
  const seen: string[] = []
  for (const url of ['https://Example.com/a.png', 'https://8.8.8.8/a.png', 'data:image/png;base64,AA==', 'https://[2606:4700::1]/', 'http://localhost/']) {
    mediaUrlProblem(url, 'image', (host) => seen.push(host))
  }
  t.same(seen, ['example.com'])
})

t.test('isPublicAddress: what a resolver may answer', async (t) => {
  for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '64:ff9b::8.8.8.8']) t.ok(isPublicAddress(ip), ip)
  for (const ip of ['127.0.0.1', '10.1.2.3', '169.254.169.254', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', 'fe80::1', 'fd00::1', '64:ff9b::7f00:1', 'not-an-ip', '']) t.notOk(isPublicAddress(ip), ip)
})

t.test('DNS check: a name resolving to a blocked address, or not resolving, is refused', async (t) => {
  const table: Record<string, string[] | Error> = {
    'public.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'rebind.example.com': ['93.184.215.14', '127.0.0.1'],
    'metadata.example.com': ['169.254.169.254'],
    'mapped.example.com': ['::ffff:10.0.0.1'],
    'missing.example.com': new Error('ENOTFOUND')
  }
  const asked: string[] = []
  const lookup = async (host: string): Promise<string[]> => {
    asked.push(host)
    const v = table[host]
    if (v === undefined || v instanceof Error) throw v ?? new Error('ENOTFOUND')
    return v
  }
  const host = (h: string, field = 'f') => ({ host: h, kind: 'image' as const, field })
  t.equal(await firstHostResolvingToBlockedAddress([host('public.example.com'), host('public.example.com')], lookup), undefined)
  t.same(asked, ['public.example.com'], 'one lookup per distinct host')
  for (const bad of ['rebind.example.com', 'metadata.example.com', 'mapped.example.com', 'missing.example.com']) {
    t.equal((await firstHostResolvingToBlockedAddress([host('public.example.com'), host(bad, 'g')], lookup))?.field, 'g', bad)
  }
  const never = async (): Promise<string[]> => await new Promise(() => {})
  t.equal((await firstHostResolvingToBlockedAddress([host('slow.example.com')], never, 10))?.host, 'slow.example.com', 'a lookup that does not answer refuses')
})
