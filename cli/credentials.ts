import { variablesAt } from '../config/load.js'
import type { Config, ProviderConfig } from '../config/schema.js'
import { credentialFields, withoutCredentials } from '../engine/upstream/credential-fields.js'

// Which providers of a config have no credentials, and what to set for each: the variables the
// config file names where the credentials would be read (`api_key: ${AZURE_OPENAI_API_KEY}`), or
// the field to fill in. Present is all that is checked: whether the upstream takes them is its own.

export interface Uncredentialed { provider: ProviderConfig, index: number, what: string }

export function uncredentialedProviders (config: Config, file: string, env: Readonly<Record<string, string | undefined>> = process.env): Uncredentialed[] {
  return withoutCredentials(config, env).map((p) => {
    const index = config.providers.indexOf(p)
    const fields = credentialFields(p, env)
    const vars = [...new Set(fields.flatMap((f) => variablesAt(file, ['providers', index, f])))]
    // Bedrock reads the environment's AWS keys when the config names none
    if (p.platform === 'bedrock' && p.aws === undefined) vars.push('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY')
    const what = vars.length > 0
      ? `${vars.join(', ')} ${vars.length > 1 ? 'are' : 'is'} not set`
      : p.platform === 'vertex' ? 'set credentials_file or access_token' : `its ${fields.join(' or ')} is empty`
    return { provider: p, index, what }
  })
}
