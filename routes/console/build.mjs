// Bundles the console pages with esbuild (build.mjs runs it into its staging folder, then puts
// the pages in dist/console):
//   the developer console (routes/console/web) into console/;
//   the operator's console (routes/console/web/admin) into console/admin.
// Each page's main.ts and styles.css get content-hashed names under its assets/ folder (uPlot and
// its stylesheet included: nothing is loaded from elsewhere), and its index.html is rewritten to
// point at them.
import { build } from 'esbuild'
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))

/** Bundles the page of `web` (index.html, main.ts, styles.css) into `out`, served under `base`. */
async function page (web, out, base) {
  mkdirSync(join(out, 'assets'), { recursive: true })
  const result = await build({
    entryPoints: { main: join(web, 'main.ts'), styles: join(web, 'styles.css') },
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2020',
    outdir: join(out, 'assets'),
    entryNames: '[name]-[hash]',
    define: { 'import.meta.env.BASE_URL': JSON.stringify(base) },
    metafile: true,
    logLevel: 'warning'
  })
  const built = (name) => basename(Object.keys(result.metafile.outputs).find((f) => basename(f).startsWith(`${name}-`) && !f.endsWith('.map')))
  const html = readFileSync(join(web, 'index.html'), 'utf8')
    .replace('href="./styles.css"', `href="${base}assets/${built('styles')}"`)
    .replace('src="./main.ts"', `src="${base}assets/${built('main')}"`)
  writeFileSync(join(out, 'index.html'), html)
}

/** Both pages, and their icon, into the folder `out` (made anew). */
export async function buildConsole (out) {
  rmSync(out, { recursive: true, force: true })
  await page(join(here, 'web', 'admin'), join(out, 'admin'), '/console/admin/')
  // the icon of both pages (and of /favicon.ico)
  copyFileSync(join(here, 'web', 'favicon.svg'), join(out, 'favicon.svg'))
  // last: its index.html is what build.mjs compares the sources' times with
  await page(join(here, 'web'), out, '/console/')
}
