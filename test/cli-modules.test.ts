import t from 'tap'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { childEnv } from './helper.js'
import { tempDir } from './temp-dir.js'

// What each command loads: a command that does not serve loads no Fastify, no plugin it does not
// run, no store it does not open, and compiles no schema. Run on the tests' build of the sources
// (.build/, a file per source: the bundle hides its parts), with a module hook that writes down
// every ES module resolved and, at exit, every CommonJS module required (a dependency loaded with
// createRequire is one).

const run = promisify(execFile)
const dir = tempDir('cli-modules')
// each run writes to the file MG_LOADED names, so that runs go side by side
writeFileSync(join(dir, 'hooks.mjs'), `import { appendFileSync } from 'node:fs'
export async function resolve (spec, ctx, next) { const r = await next(spec, ctx); appendFileSync(process.env.MG_LOADED, r.url + '\\n'); return r }
`)
writeFileSync(join(dir, 'register.mjs'), `import { register, createRequire } from 'node:module'
import { appendFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
register('./hooks.mjs', import.meta.url)
const { _cache } = createRequire(import.meta.url)('node:module')
process.on('exit', () => { appendFileSync(process.env.MG_LOADED, Object.keys(_cache).map((f) => pathToFileURL(f).href + '\\n').join('')) })
`)

/** The project's own files and the dependencies (a package's files: `ajv/dist/core.js`) that `modelgate ARGS` loads. */
let runs = 0
async function loaded (args: string[], env: Record<string, string> = {}): Promise<{ code: number, stdout: string, stderr: string, project: string[], packages: string[] }> {
  const log = join(dir, `loaded-${++runs}.txt`)
  writeFileSync(log, '')
  let out: { code: number, stdout: string, stderr: string }
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', join(dir, 'register.mjs'), fromRoot('.build', 'cli', 'index.js'), ...args], { env: childEnv({ ...env, MG_LOADED: log }), cwd: fromRoot() })
    out = { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    out = { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
  const root = new URL(`file://${fromRoot()}/`).href
  const urls = [...new Set(readFileSync(log, 'utf8').split('\n').filter((u) => u.startsWith(root)).map((u) => u.slice(root.length)))]
  const packages = urls.filter((u) => u.startsWith('node_modules/')).map((u) => u.slice('node_modules/'.length))
  // a built file by its source's name (.build/cli/keys.js: cli/keys.ts)
  const project = urls.filter((u) => u.startsWith('.build/')).map((u) => u.slice('.build/'.length).replace(/\.js$/, '.ts'))
  return { ...out, project, packages }
}

/** The packages among `files` whose name is one of `names` (`@opentelemetry/*`: the whole scope). */
const of = (files: string[], names: string[]): string[] => [...new Set(files.map((f) => f.startsWith('@') ? f.split('/').slice(0, 2).join('/') : f.split('/')[0] as string))]
  .filter((p) => names.some((n) => n.endsWith('/*') ? p.startsWith(n.slice(0, -1)) : p === n))

t.test('--version and --help load no store, no Fastify, no plugin: only the command line\'s own modules', async (t) => {
  // (the SQLite driver's module names where the driver is, and loads it only when asked)
  const own = ['cli/', 'paths.ts', 'engine/kernel/money.ts', 'routes/admin/usage-record.ts', 'engine/store/sqlite/driver.ts']
  for (const args of [['--version'], ['--help'], ['keys', '--help']]) {
    const r = await loaded(args)
    t.match(r.stdout, args[0] === '--version' ? /^\d+\.\d+\.\d+/ : /modelgate keys create/, args.join(' '))
    t.ok(r.project.includes('cli/index.ts'), 'the hook saw the command load')
    t.same(r.project.filter((p) => !own.some((o) => p.startsWith(o))), [], `${args.join(' ')}: no other module of the project`)
    t.same(r.packages, [], `${args.join(' ')}: no dependency`)
  }
})

// what serving needs, and what only some commands do: none of it in a command that does not need it
const SERVING = ['fastify', '@fastify/cors', '@fastify/rate-limit', '@fastify/static', '@fastify/type-provider-typebox', 'fastify-plugin', 'light-my-request', 'undici', 'pino', 'prom-client', '@opentelemetry/*', 'lru-cache', '@modelcontextprotocol/*', '@eslint-community/regexpp']
const OTHER_STORE = ['pg', 'ioredis']
const WRITER = ['yaml']

/** The files of ajv loaded other than its small run-time helpers (which the validators compiled ahead use): its compiler. */
const compiler = (packages: string[]): string[] => packages.filter((p) => p.startsWith('ajv/') && !p.startsWith('ajv/dist/runtime/'))

t.test('each command loads only what it does: no Fastify nor plugin outside serve, no schema compiled, only the store it opens', async (t) => {
  const work = tempDir('cli-modules-config')
  const file = join(work, 'gw.yaml')
  writeFileSync(file, readFileSync(fromRoot('config', 'gateway.yaml'), 'utf8').replace('${MODELGATE_DB:-../data/modelgate.db}', join(work, 'gw.db')))
  const env = { MODELGATE_CONFIG: file }
  const cases: Array<{ args: string[], code?: number }> = [
    { args: ['keys', 'list'] },
    { args: ['keys', 'create', '--org', 'demo', '--project', 'playground'] },
    { args: ['orgs', 'list'] },
    { args: ['usage'] },
    { args: ['credits', 'add', '--org', 'demo', '--amount-usd', '1'] },
    { args: ['reload'], code: 2 },
    { args: ['mcp', 'list'] },
    { args: ['models', 'check'] },
    // the chain's plugins are read (their options checked), not run
    { args: ['config', 'check'] },
    // the starter config is the build's (dist/init-gateway.yaml): no YAML writer
    { args: ['init', join(work, 'new')] }
  ]
  // two at a time
  const results: Array<Awaited<ReturnType<typeof loaded>>> = []
  for (let i = 0; i < cases.length; i += 2) results.push(...await Promise.all(cases.slice(i, i + 2).map(async (c) => await loaded(c.args, env))))
  for (const [i, c] of cases.entries()) {
    const name = c.args.slice(0, 2).join(' ')
    const r = results[i] as Awaited<ReturnType<typeof loaded>>
    t.equal(r.code, c.code ?? 0, `${name}: ${r.stderr}`)
    t.same(of(r.packages, [...SERVING, ...OTHER_STORE, ...WRITER]), [], `${name}: nothing of serving, PostgreSQL or the YAML writer`)
    t.same(compiler(r.packages), [], `${name}: no schema compiled`)
    t.notOk(r.project.includes('engine/store/postgres/index.ts'), `${name}: not the PostgreSQL store`)
    t.same(r.project.filter((p) => p.startsWith('routes/v1/') || p === 'app.ts' || p === 'server.ts'), [], `${name}: no route, no app`)
    // config check reads the definitions of the plugins the chain lists (cors, rate-limit, auth... and metrics): no other
    const plugins = r.project.filter((p) => /^plugins\/[a-z-]+\.ts$/.test(p))
    t.same(plugins.filter((p) => !(name === 'config check' && !/guardrails|cache|tracing/.test(p))), [], `${name}: ${name === 'config check' ? 'no plugin the chain does not list' : 'no plugin'}`)
    if (name === 'config check') t.ok(plugins.includes('plugins/rate-limit.ts'), 'config check reads the rate-limit plugin the chain lists')
  }
})

t.test('the starter config the build wrote is the one init would make now', async (t) => {
  const { starterTemplate } = await import('../cli/init.js')
  t.equal(readFileSync(fromRoot('dist', 'init-gateway.yaml'), 'utf8'), await starterTemplate())
})
