import AjvCompiler from '@fastify/ajv-compiler'
import type { AnySchema, Ajv } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'

// One route-schema validator compiler for every app of the process. Fastify makes each app its own
// Ajv and compiles every route schema again, about 40 ms an app: paid at each reload that rebuilds
// the app, and by a test suite that builds hundreds. Here the apps share Fastify's own compiler
// pool (apps built with the same Ajv options share one Ajv), and each compiled schema is kept by
// its object for as long as that object lives: a route schema made once (a module's constant) is
// compiled once. A schema is removed from Ajv's own cache as soon as it is compiled, so that one
// made anew for each app (a config's) does not stay in memory after its app.

// the pool's types name a compiler's argument a schema; Fastify hands it the route's definition
type RouteCompiler = FastifySchemaCompiler<unknown>

const pool = AjvCompiler()
type Compile = ReturnType<typeof pool>
/** Each of the pool's compilers (one per set of options and shared schemas): its Ajv, to clear its cache, and what it compiled, by schema. */
const compilers = new Map<Compile, { ajv: Ajv | undefined, compiled: WeakMap<object, ReturnType<RouteCompiler>> }>()

export const sharedValidators: typeof pool = (externalSchemas, options) => {
  let made: Ajv | undefined
  const compile = pool(externalSchemas, { ...options, onCreate: (ajv: Ajv) => { made = ajv; options?.onCreate?.(ajv) } })
  let mine = compilers.get(compile)
  if (mine === undefined) compilers.set(compile, mine = { ajv: made, compiled: new WeakMap() })
  const { ajv, compiled } = mine
  const own = compile as unknown as RouteCompiler
  const shared: RouteCompiler = (route) => {
    const schema = route.schema as { $id?: unknown }
    let validate = compiled.get(schema)
    if (validate === undefined) {
      validate = own(route)
      compiled.set(schema, validate)
      // the compiled function needs no entry in Ajv's cache; a schema with an $id keeps its own,
      // which another schema's $ref may name
      if (schema.$id === undefined) ajv?.removeSchema(schema as AnySchema)
    }
    return validate
  }
  return shared as unknown as Compile
}
