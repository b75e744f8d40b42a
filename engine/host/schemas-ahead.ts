import { CONFIG_CHECK } from '../../config/load.js'
import { ConfigSchema } from '../../config/schema.js'
import { compiledAheadCache, precompileSchemas } from '../kernel/schema-check.js'
import { builtinPlugins } from './builtins.js'
import { OPTIONS_CHECK } from './index.js'

// What the build compiles ahead (build.mjs writes it to dist/validators.cjs, and V8's code for it
// to dist/validators.cjs.v8): the schemas every
// command that reads a config checks, each with the options it is checked with, so that no
// process compiles them.

/** The schemas compiled ahead, with their checking options. */
export async function schemasAhead (): Promise<Array<{ schema: object, defaults: boolean, coerce: boolean }>> {
  return [
    { schema: ConfigSchema, ...CONFIG_CHECK },
    ...(await builtinPlugins()).flatMap((p) => p.options === undefined ? [] : [{ schema: p.options, ...OPTIONS_CHECK }])
  ]
}

/** The source of dist/validators.cjs. */
export async function validatorsAhead (): Promise<string> {
  return precompileSchemas(await schemasAhead())
}

export { compiledAheadCache }
