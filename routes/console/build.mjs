// Bundles the console page (routes/console/web) into dist/console with esbuild: main.ts and
// styles.css get content-hashed names under assets/, and index.html is rewritten to point at them.
import { build } from 'esbuild'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const web = join(here, 'web')
const out = join(here, '..', '..', 'dist', 'console')
const BASE = '/console/'

rmSync(out, { recursive: true, force: true })
mkdirSync(join(out, 'assets'), { recursive: true })
const result = await build({
  entryPoints: { main: join(web, 'main.ts'), styles: join(web, 'styles.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  define: { 'import.meta.env.BASE_URL': JSON.stringify(BASE) },
  metafile: true,
  logLevel: 'warning'
})
const built = (name) => basename(Object.keys(result.metafile.outputs).find((f) => basename(f).startsWith(`${name}-`)))
const html = readFileSync(join(web, 'index.html'), 'utf8')
  .replace('href="./styles.css"', `href="${BASE}assets/${built('styles')}"`)
  .replace('src="./main.ts"', `src="${BASE}assets/${built('main')}"`)
writeFileSync(join(out, 'index.html'), html)
