import { register } from 'node:module'
import { pathToFileURL } from 'node:url'
import * as api from '../../plugins/api/index.js'
import { fromRoot, inExecutable } from '../../paths.js'

// A plugin package names modelgate as an optional peer dependency only (modelgate is installed
// from its tarball, not from the npm registry), so where the package is installed, beside the
// config, there may be no `modelgate` to import. The gateway that loads a plugin answers the
// plugin's `modelgate` and `modelgate/*` imports with its own package's exports: the plugin finds
// the API wherever each was installed, and shares it with the gateway (one copy of the errors).
// The executable file has no package on disk: it answers `modelgate/plugin` with a module made of
// its own plugin API, handed over through a global.

let registered = false

const API_GLOBAL = 'modelgate.plugin-api'

/** Resolves modelgate's exports as imported from inside this gateway's package. */
function fromPackage (): string {
  const self = pathToFileURL(fromRoot('package.json')).href
  return `export async function resolve (specifier, context, next) {
  if (specifier === 'modelgate' || specifier.startsWith('modelgate/')) return next(specifier, { ...context, parentURL: ${JSON.stringify(self)} })
  return next(specifier, context)
}`
}

/** Answers `modelgate/plugin` with the executable file's own API; refuses the other exports (tests' helpers) by name. */
function fromExecutable (): string {
  (globalThis as Record<symbol, unknown>)[Symbol.for(API_GLOBAL)] = api
  const names = Object.keys(api).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n) && n !== 'default')
  const source = `const api = globalThis[Symbol.for(${JSON.stringify(API_GLOBAL)})]\nexport const { ${names.join(', ')} } = api\n`
  return `export async function resolve (specifier, context, next) {
  if (specifier === 'modelgate/plugin') return { url: 'modelgate:plugin', shortCircuit: true }
  if (specifier === 'modelgate' || specifier.startsWith('modelgate/')) {
    throw Object.assign(new Error(specifier + ': the modelgate executable file exports modelgate/plugin only'), { code: 'ERR_MODULE_NOT_FOUND' })
  }
  return next(specifier, context)
}
export async function load (url, context, next) {
  if (url === 'modelgate:plugin') return { format: 'module', source: ${JSON.stringify(source)}, shortCircuit: true }
  return next(url, context)
}`
}

/**
 * From now on in this process, `import 'modelgate/plugin'` (any `modelgate` export) resolves to
 * this gateway's own package, as if imported from inside it. Registered once, before the first
 * plugin module is imported; a process that loads none pays nothing.
 */
export function resolveOwnApi (): void {
  if (registered) return
  registered = true
  register(`data:text/javascript,${encodeURIComponent(inExecutable ? fromExecutable() : fromPackage())}`)
}
