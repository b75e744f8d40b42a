import { nanoToUsd } from '../engine/kernel/money.js'
import { usageDetail } from '../routes/admin/usage-record.js'
import { UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate usage [--org O] [--project P] [--since ISO] [--limit N] [--json] [--config FILE]

Usage records, newest first, and their totals. A call that tried more than one provider lists
them, and one whose parameters were dropped names them; --json prints every field, its attempts,
dropped parameters, cache writes, images and cost by part (cost_detail) included.`

export const flags = { '': ['org', 'project', 'since', 'limit', 'json', 'config'] } as const

export async function run ({ args }: CommandInput): Promise<void> {
  const since = args.since === undefined ? undefined : Date.parse(args.since)
  if (since !== undefined && Number.isNaN(since)) throw new UsageError(`--since: not an ISO date: ${args.since}`, 'usage')
  const limit = args.limit === undefined ? 50 : Number(args.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit: an integer from 1 to 10000', 'usage')
  await withStore((await readConfig(args)).config, async (store) => {
    const filter = { org: args.org, project: args.project, since }
    const records = (await store.usage.page(filter, limit)).map(usageDetail)
    const t = await store.usage.totals(filter)
    const totals = { calls: t.calls, prompt_tokens: t.prompt_tokens, cached_input_tokens: t.cached_input_tokens, completion_tokens: t.completion_tokens, total_tokens: t.total_tokens, cost_usd: nanoToUsd(t.cost_nano) }
    if (args.json === true) { process.stdout.write(JSON.stringify({ totals, data: records }, null, 2) + '\n'); return }
    for (const r of records) {
      const attempts = r.attempts as Array<{ provider: string }>
      const dropped = r.dropped_params as string[]
      const tried = attempts.length > 1 ? `  tried ${attempts.map((a) => a.provider).join(', ')}` : ''
      const without = dropped.length > 0 ? `  dropped ${dropped.join(', ')}` : ''
      const writes = r.cache_write_tokens === 0 ? '' : `, cache writes ${String(r.cache_write_tokens)}`
      const images = r.images === 0 ? '' : `  images ${String(r.images)}`
      const tier = (r.cost_detail as { tier: number | null } | null)?.tier ?? null
      const tiered = tier === null ? '' : ` (tier above ${tier} input tokens)`
      const refused = r.error === null ? '' : `  ${String(r.error)}`
      process.stdout.write(`${String(r.created_at)}  ${String(r.org)}/${String(r.project)}  ${String(r.model)}  ${String(r.status)}${refused}  in ${String(r.prompt_tokens)} (cached ${String(r.cached_input_tokens)}${writes})  out ${String(r.completion_tokens)}${images}  $${String(r.cost_usd)}${tiered}${tried}${without}\n`)
    }
    process.stdout.write(`total: ${totals.calls} calls, ${totals.prompt_tokens} input tokens (${totals.cached_input_tokens} cached), ${totals.completion_tokens} output tokens, $${totals.cost_usd}\n`)
  })
}
