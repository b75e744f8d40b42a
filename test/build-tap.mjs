// Run by `npm install` and `npm ci` in a checkout (the package's `dependencies` script): builds
// tap for the plugin set package.json names, so the first `npm test` after an install already
// runs with it. Tap rebuilds itself when
// its plugin list changed, but only after it started that run's test processes with the loaders
// of its default set (ts-node and the mock loader, which double each test file's start).
// Skipped where tap is not installed (an install without devDependencies) and for npm pack.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const command = process.env.npm_command ?? ''
const tapBin = fileURLToPath(new URL('../node_modules/tap/dist/esm/run.mjs', import.meta.url))
if (existsSync(tapBin) && command !== 'pack' && command !== 'publish') {
  const r = spawnSync(process.execPath, [tapBin, 'build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (r.status !== 0) console.error('tap build failed; the first `npm test` rebuilds it (and runs slower)')
}
