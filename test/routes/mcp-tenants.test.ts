import t from 'tap'
import { KEY_A, KEY_B, KEY_OTHER_ORG } from '../helper.js'
import { connect, gateway, textOf } from '../mcp-gateway.js'

// What one tenant can reach of another's through the MCP servers behind the gateway: the state a
// server keeps per session or per process, one per organization unless the server is shared.
// (mcp-sessions.test.ts: how many of those sessions there may be; mcp-output.test.ts: what the
// servers send back.)

const pidOf = (r: unknown): number => (JSON.parse(textOf(r)) as { pid: number }).pid

t.test('state a tool keeps is per organization, unless the server is shared', async (t) => {
  // two keys of acme in two projects, one of zeta
  const orgs = [
    { org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['*'] }] }, { id: 'ops', keys: [{ key: KEY_B, mcp: ['*'] }] }] },
    { org: 'zeta', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG, mcp: ['*'] }] }] }
  ]
  const gw = await gateway(t, { stdio: true, tenants: orgs })
  const acme = await connect(t, gw, KEY_A)
  const acmeOps = await connect(t, gw, KEY_B)
  const zeta = await connect(t, gw, KEY_OTHER_ORG)

  for (const server of ['docs', 'files']) {
    t.equal(textOf(await acme.callTool({ name: `${server}__remember`, arguments: { text: `acme's secret on ${server}` } })), 'kept')
    t.equal(textOf(await zeta.callTool({ name: `${server}__recall` })), 'kept: ', `${server}: another organization does not read it`)
    t.equal(textOf(await acmeOps.callTool({ name: `${server}__recall` })), `kept: acme's secret on ${server}`, `${server}: the same organization does, from another project`)
  }
  const acmePid = pidOf(await acme.callTool({ name: 'files__pid' }))
  const zetaPid = pidOf(await zeta.callTool({ name: 'files__pid' }))
  t.not(acmePid, zetaPid, 'over stdio, a process for each organization')
  t.equal(pidOf(await acmeOps.callTool({ name: 'files__pid' })), acmePid)
  t.ok(gw.logs.some((l) => l.msg === 'MCP session opened' && l.mcp_server === 'files' && l.org === 'zeta'), 'the log says whose session opened')

  t.test('shared: true, the operator\'s explicit choice: one session for all', async (t) => {
    const gw = await gateway(t, { servers: (mock) => [{ id: 'docs', transport: 'http', url: mock.url, shared: true }], tenants: orgs })
    const acme = await connect(t, gw, KEY_A)
    const zeta = await connect(t, gw, KEY_OTHER_ORG)
    await acme.callTool({ name: 'docs__remember', arguments: { text: 'in common' } })
    t.equal(textOf(await zeta.callTool({ name: 'docs__recall' })), 'kept: in common')
    t.equal(gw.mock.methods.filter((m) => m === 'initialize').length, 1, 'one session: the gateway\'s own')
  })
})
