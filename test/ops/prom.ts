// Reading the Prometheus text format in tests: the sum of the samples of `name` whose labels
// include `labels` (all of them, when none are given).

export function parseLabels (s: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of s.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) out[m[1] as string] = (m[2] as string).replace(/\\(.)/g, '$1')
  return out
}

export function sample (text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$/.exec(line)
    if (m === null || m[1] !== name) continue
    const have = parseLabels(m[3] ?? '')
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[4])
  }
  return sum
}
