import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The project root holds package.json; code runs from the sources (tests) or from dist/ (npm start),
// so files shipped beside the sources (migrations, config, console assets) are found from here.
function findRoot (): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('modelgate: package.json not found above ' + fileURLToPath(import.meta.url))
    dir = parent
  }
  return dir
}

export const projectRoot = findRoot()
export const fromRoot = (...parts: string[]): string => join(projectRoot, ...parts)
