import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

// Builds the console page (routes/console/web) into dist/console, served under /console/.
const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url))

export default defineConfig({
  root: here('./web'),
  base: '/console/',
  build: { outDir: here('../../dist/console'), emptyOutDir: true, target: 'es2020', sourcemap: false }
})
