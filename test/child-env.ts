// Tap preloads its process recorder into every test process and, through the process-on-spawn
// hook, puts it back into the NODE_OPTIONS of every process a test starts, whatever env the test
// gave it. In a child that recorder costs more than the child's own start (a module-loading thread
// and a record of every file it loads; `modelgate --version` takes 1.4 s instead of 0.5 s, and a
// gateway's cluster workers inherit it), and no child of a test needs it. So the environment
// childEnv makes carries a mark, and a hook that runs after tap's takes NODE_OPTIONS out again.
const MARK = 'MODELGATE_TEST_CHILD'

interface SpawnHookState { listeners: Array<(opts: { env: Record<string, string | undefined> }) => void> }
const state = (globalThis as Record<symbol, SpawnHookState | undefined>)[Symbol.for('process-on-spawn@*:singletonId')]
if (state !== undefined && !state.listeners.some((l) => (l as { mark?: string }).mark === MARK)) {
  const strip = Object.assign((opts: { env: Record<string, string | undefined> }): void => {
    if (opts.env[MARK] !== '1') return
    delete opts.env.NODE_OPTIONS
    delete opts.env[MARK]
  }, { mark: MARK })
  state.listeners.push(strip)
}

/**
 * The environment for a child process a test starts: this one's, with `extra` on top, less the
 * NODE_OPTIONS the test runner sets to follow its own processes (see above).
 */
export function childEnv (extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra, [MARK]: '1' }
  delete env.NODE_OPTIONS
  return env
}
