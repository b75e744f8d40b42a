import t, { type Test } from 'tap'
import { execFile, spawn } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { childEnv } from './helper.js'
import { servedPort } from './served-port.js'
import { tempDir } from './temp-dir.js'

// What `modelgate reload` (and `mcp list`) believe of modelgate.pid: a file, lock file or folder
// anyone but the gateway's user could have written is refused, and the admin token goes only to a
// loopback address or the config's own server.host and port. A "planted" file names this test's
// own process (alive) and a port of its own that records whatever reaches it.

const run = promisify(execFile)
const CLI = fromRoot('dist', 'cli', 'index.js')
const TOKEN = 'pid-file-admin-token-0123456789abcdef'

// the usual umask, under which a folder made without a mode would be 0755
process.umask(0o022)

async function cli (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: childEnv({}) })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

interface Recorder { port: number, heard: string[] }

/** An HTTP server that answers a reload as a gateway would and records each request with its authorization. */
async function recorder (t: Test, host = '127.0.0.1'): Promise<Recorder> {
  const heard: string[] = []
  const server: Server = createServer((req, res) => {
    heard.push(`${req.method ?? ''} ${req.url ?? ''} ${req.headers.authorization ?? ''}`)
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ reloaded: true, changes: [], data: [] }))
  })
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  t.teardown(() => { server.close() })
  return { port: (server.address() as AddressInfo).port, heard }
}

/** A folder with a config whose store is in it, and the admin token; `extra` on top. */
function gatewayFolder (name: string, extra: Record<string, unknown> = {}): { dir: string, file: string } {
  const dir = tempDir(name)
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({ store: { sqlite: join(dir, 'gw.db') }, admin: { token: TOKEN }, ...extra }))
  return { dir, file }
}

/** A pid file in `dir` naming this live process at `host:port` as the gateway of `store`, with `mode`. */
function plant (dir: string, port: number, mode: number, host = '127.0.0.1', store = join(dir, 'gw.db')): string {
  const path = join(dir, 'modelgate.pid')
  writeFileSync(path, JSON.stringify({ gateways: [{ pid: process.pid, host, port, store }] }) + '\n')
  chmodSync(path, mode)
  return path
}

t.test('reload believes no pid file that anyone else could have written: the token goes nowhere, and the message says why and what to do', async (t) => {
  const rec = await recorder(t)
  // each case sets up a folder and gives the config to reload
  const cases: Array<{ name: string, setUp: (dir: string, file: string) => string, says: RegExp }> = [
    { name: 'a group-writable file', setUp: (dir, file) => { plant(dir, rec.port, 0o664); return file }, says: /not trusting \S+modelgate\.pid: its group may write it \(mode 0664\)/ },
    { name: 'a file anyone may write', setUp: (dir, file) => { plant(dir, rec.port, 0o606); return file }, says: /not trusting \S+modelgate\.pid: anyone may write it \(mode 0606\)/ },
    { name: 'a private file in a folder anyone may write', setUp: (dir, file) => { plant(dir, rec.port, 0o600); chmodSync(dir, 0o777); return file }, says: /not trusting \S+modelgate\.pid: its folder \S+: anyone may write it \(mode 0777\)/ },
    { name: 'a private file in a group-writable folder', setUp: (dir, file) => { plant(dir, rec.port, 0o600); chmodSync(dir, 0o770); return file }, says: /its folder \S+: its group may write it \(mode 0770\)/ },
    {
      name: 'a link to a private file',
      setUp: (dir, file) => {
        symlinkSync(plant(tempDir('pid-file-elsewhere'), rec.port, 0o600, '127.0.0.1', join(dir, 'gw.db')), join(dir, 'modelgate.pid'))
        return file
      },
      says: /not trusting \S+modelgate\.pid: it is a symbolic link/
    },
    {
      name: 'a private file in a private folder inside one anyone may write (not sticky)',
      setUp: (dir) => {
        const inner = join(dir, 'inner')
        mkdirSync(inner, { mode: 0o700 })
        plant(inner, rec.port, 0o600)
        chmodSync(dir, 0o777)
        const file = join(inner, 'gw.json')
        writeFileSync(file, JSON.stringify({ store: { sqlite: join(inner, 'gw.db') }, admin: { token: TOKEN } }))
        return file
      },
      says: /not trusting \S+modelgate\.pid: \S+, a folder above it,: anyone may write it \(mode 0777\)/
    }
  ]
  for (const c of cases) {
    const { dir, file } = gatewayFolder('pid-file-planted')
    const config = c.setUp(dir, file)
    const res = await cli(['reload', '--config', config])
    t.equal(res.code, 2, `${c.name}: refused`)
    t.match(res.stderr, c.says, `${c.name}: says why`)
    t.match(res.stderr, /only a pid file, lock file and folders that belong to the gateway's user \(or root\) and that no one else may write are believed: (chmod go-w|remove) \//, `${c.name}: and what to do`)
    t.notMatch(res.stdout, /reloaded/)
  }
  t.same(rec.heard, [], 'nothing reached the port the files named')
})

t.test('a pid file of another user is not believed (checked when the test runs as root, which can make one)', async (t) => {
  if (process.geteuid?.() !== 0) { t.plan(0, 'only root can give a file to another user'); return }
  const rec = await recorder(t)
  const { dir, file } = gatewayFolder('pid-file-owner')
  chownSync(plant(dir, rec.port, 0o600), 65534, 65534)
  const res = await cli(['reload', '--config', file])
  t.equal(res.code, 2)
  t.match(res.stderr, /not trusting \S+modelgate\.pid: it belongs to uid 65534, not to this user \(uid 0\) or root; .*: run this command as the gateway's user/)
  t.same(rec.heard, [], 'nothing reached the port it named')
})

t.test('mcp list refuses a planted pid file as reload does, and connects to nothing', async (t) => {
  const rec = await recorder(t)
  const { dir, file } = gatewayFolder('pid-file-mcp', { mcp: { servers: [{ id: 'docs', transport: 'http', url: `http://127.0.0.1:${rec.port}/mcp` }] } })
  plant(dir, rec.port, 0o666)
  const res = await cli(['mcp', 'list', '--config', file])
  t.equal(res.code, 2)
  t.match(res.stderr, /not trusting \S+modelgate\.pid: anyone may write it \(mode 0666\)/)
  t.same(rec.heard, [], 'neither the admin API nor the server was asked')
})

t.test('reload sends the admin token to a loopback address or the config\'s own server.host and port, to no other', async (t) => {
  const outward = Object.values(networkInterfaces()).flat().find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address
  if (outward === undefined) { t.plan(0, 'this machine has no address but loopback'); return }
  const rec = await recorder(t, '0.0.0.0')
  // a file the gateway's user wrote, naming an address of this machine that is not loopback
  const { dir, file } = gatewayFolder('pid-file-address')
  plant(dir, rec.port, 0o600, outward)
  const res = await cli(['reload', '--config', file])
  t.equal(res.code, 2)
  t.match(res.stderr, new RegExp(`listens on ${outward.replace(/\./g, '\\.')}:${rec.port}, which is neither a loopback address nor the config's server\\.host and port \\(127\\.0\\.0\\.1:8080\\): the admin token is sent to no other address`))
  t.match(res.stderr, new RegExp(`kill -HUP ${process.pid}`), 'and names the signal instead')
  t.same(rec.heard, [], 'the token went nowhere')

  // the same address as the config's own: asked
  writeFileSync(file, JSON.stringify({ server: { host: outward, port: rec.port }, store: { sqlite: join(dir, 'gw.db') }, admin: { token: TOKEN } }))
  const asked = await cli(['reload', '--config', file])
  t.equal(asked.code, 0, asked.stderr)
  t.match(asked.stdout, /^reloaded: nothing changed/)
  t.same(rec.heard, [`POST /admin/v1/reload Bearer ${TOKEN}`])

  // loopback, at whatever port: asked
  rec.heard.length = 0
  const loop = await recorder(t)
  writeFileSync(file, JSON.stringify({ store: { sqlite: join(dir, 'gw.db') }, admin: { token: TOKEN } }))
  plant(dir, loop.port, 0o600, '127.0.0.1')
  const local = await cli(['reload', '--config', file])
  t.equal(local.code, 0, local.stderr)
  t.same(loop.heard, [`POST /admin/v1/reload Bearer ${TOKEN}`])
})

t.test('serve refuses to start beside a pid file it cannot trust, and names it', async (t) => {
  const { dir, file } = gatewayFolder('pid-file-serve')
  plant(dir, 1, 0o664)
  const res = await cli(['serve', '--config', file, '--workers', '1', '--port', '0'])
  t.equal(res.code, 2)
  t.match(res.stderr, /not trusting \S+modelgate\.pid: its group may write it \(mode 0664\)/)
  t.notMatch(res.stdout, /listening/)
  t.notOk(existsSync(join(dir, 'gw.db')), 'the store was not opened')

  // its lock file the same (a fine pid file beside it)
  const other = gatewayFolder('pid-file-serve-lock')
  writeFileSync(join(other.dir, 'modelgate.lock'), '')
  chmodSync(join(other.dir, 'modelgate.lock'), 0o666)
  const locked = await cli(['serve', '--config', other.file, '--workers', '1', '--port', '0'])
  t.equal(locked.code, 2)
  t.match(locked.stderr, /not trusting \S+modelgate\.lock: anyone may write it \(mode 0666\)/)
  t.notOk(existsSync(join(other.dir, 'gw.db')), 'the store was not opened')
})

t.test('serve makes the data folder 0700 (and its lock and pid files 0600) before anything is in it', async (t) => {
  const parent = tempDir('pid-file-mode')
  const data = join(parent, 'fresh', 'data')
  const file = join(parent, 'gw.json')
  writeFileSync(file, JSON.stringify({ server: { port: 0 }, store: { sqlite: join(data, 'gw.db') }, admin: { token: TOKEN } }))
  const child = spawn(process.execPath, [CLI, 'serve', '--config', file, '--workers', '1'], { env: childEnv({ LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  t.teardown(async () => { if (child.exitCode === null) { child.kill('SIGTERM'); await exited } })
  await servedPort(child, 'serve')
  const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8)
  t.equal(mode(join(parent, 'fresh')), '700', 'the folder made above it too')
  t.equal(mode(data), '700', 'the data folder')
  t.equal(mode(join(data, 'modelgate.lock')), '600', 'the lock file')
  t.equal(mode(join(data, 'modelgate.pid')), '600', 'the pid file')
  t.equal(mode(join(data, 'gw.db')), '600', 'the store')
  const reloaded = await cli(['reload', '--config', file])
  t.equal(reloaded.code, 0, reloaded.stderr)
  t.match(reloaded.stdout, /^reloaded: nothing changed/, 'and reload believes the files the gateway wrote')
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})
