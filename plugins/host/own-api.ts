import { register } from 'node:module'
import { pathToFileURL } from 'node:url'
import { fromRoot } from '../../paths.js'

// A plugin package names modelgate as an optional peer dependency only (modelgate is installed
// from its tarball, not from the npm registry), so where the package is installed, beside the
// config, there may be no `modelgate` to import. The gateway that loads a plugin answers the
// plugin's `modelgate` and `modelgate/*` imports with its own package's exports: the plugin finds
// the API wherever each was installed, and shares it with the gateway (one copy of the errors).

let registered = false

/**
 * From now on in this process, `import 'modelgate/plugin'` (any `modelgate` export) resolves to
 * this gateway's own package, as if imported from inside it. Registered once, before the first
 * plugin module is imported; a process that loads none pays nothing.
 */
export function resolveOwnApi (): void {
  if (registered) return
  registered = true
  const self = pathToFileURL(fromRoot('package.json')).href
  const hooks = `export async function resolve (specifier, context, next) {
  if (specifier === 'modelgate' || specifier.startsWith('modelgate/')) return next(specifier, { ...context, parentURL: ${JSON.stringify(self)} })
  return next(specifier, context)
}`
  register(`data:text/javascript,${encodeURIComponent(hooks)}`)
}
