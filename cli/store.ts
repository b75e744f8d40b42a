import { fail, UsageError, type CommandInput } from './command.js'

export const help = `modelgate store migrate --from FILE.db --to postgres://…

Copies a SQLite store (stop the gateway first) into an empty PostgreSQL database: organizations,
balances, projects, keys, open holds, quota usage, usage records and stored content, in one
transaction; then compares the totals of both and exits with status 1 if they differ.`

export const flags = { migrate: ['from', 'to'] } as const

export async function run ({ args }: CommandInput): Promise<void> {
  if (args.from === undefined || args.to === undefined) throw new UsageError('store migrate needs --from and --to', 'store')
  if (!/^postgres(ql)?:\/\//.test(args.to)) throw new UsageError('--to: a postgres:// URL', 'store')
  const { migrateSqliteToPostgres } = await import('../engine/store/postgres/from-sqlite.js')
  const r = await migrateSqliteToPostgres(args.from, args.to)
  process.stdout.write(`${'total'.padEnd(18)}${'sqlite'.padStart(22)}${'postgres'.padStart(22)}\n`)
  for (const [k, v] of Object.entries(r.source)) {
    const t = r.target[k as keyof typeof r.target]
    process.stdout.write(`${k.padEnd(18)}${String(v).padStart(22)}${String(t).padStart(22)}${v === t ? '' : '   DIFFERS'}\n`)
  }
  if (!r.same) fail('modelgate: the totals differ: the copy was made, check the rows above', 1)
  process.stdout.write('modelgate: copied; every total matches\n')
}
