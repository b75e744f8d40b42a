// Preloaded into every test process (`node-arg` in package.json).
//
// 1. Tap preloads its process recorder (@tapjs/processinfo) into each test process and, through
//    the process-on-spawn hook, adds it to the NODE_OPTIONS of every process a test starts,
//    whatever environment the test gave it: a gateway's MCP stdio server, `npm pack` and the
//    scripts npm runs, a CLI command, a store opened by six processes at once. In a child the
//    recorder costs more than the child's own start (a module-loading thread, and a record of
//    every file it loads), and no test reads what it records (coverage is off). So a hook that runs
//    after tap's takes it out of every child's NODE_OPTIONS again, leaving any other option there.
// 2. In the test process itself the recorder costs more still: its hooks run on a thread of their
//    own and every module the file loads crosses to it and back, about 1.2 s of CPU for a file that
//    builds the app (1.8 s without it). Tap gives no way to leave it out, so a test process that has
//    it starts the same file again without it (the same arguments and environment, its output on
//    the same pipes) and exits as that child exits, passing on tap's signals: what is left is the
//    first process's start. The child (MODELGATE_TEST_REEXEC in its environment, taken out at once
//    so that its own children do not see it) goes when the first one goes.
//    MODELGATE_TEST_RECORDER=1 keeps the recorder (for a coverage run of tap's).
// 3. `npm test` runs the built tests (.build/, by test/build.mjs); a test file given as TypeScript
//    (`npx tap test/x.test.ts`) runs from its sources, so tsx is registered for it alone.
const state = globalThis[Symbol.for('process-on-spawn@*:singletonId')]
// NODE_OPTIONS as tap writes it: each option in double quotes ("--import=file:///…/import.mjs")
const OPTION = /"(?:[^"\\]|\\.)*"|\S+/g
const RECORDER = /^"?--(import|loader|experimental-loader)=[^"]*@tapjs[\\/]processinfo[\\/]/
/** Takes the recorder out of `env`'s NODE_OPTIONS, leaving any other option there. */
function recorderOut (env) {
  const options = env.NODE_OPTIONS
  if (options === undefined) return
  const kept = (options.match(OPTION) ?? []).filter((o) => !RECORDER.test(o))
  if (kept.length === 0) delete env.NODE_OPTIONS
  else env.NODE_OPTIONS = kept.join(' ')
}
if (state !== undefined && !state.listeners.some((l) => l.recorderOut === true)) {
  state.listeners.push(Object.assign((opts) => { if (opts.env !== undefined) recorderOut(opts.env) }, { recorderOut: true }))
}

const recorded = process.execArgv.some((a) => RECORDER.test(a))
if (recorded && process.env.MODELGATE_TEST_RECORDER !== '1' && process.env.TAP === '1') {
  const { spawn } = await import('node:child_process')
  const env = { ...process.env, MODELGATE_TEST_REEXEC: '1' }
  recorderOut(env)
  const child = spawn(process.execPath, [...process.execArgv.filter((a) => !RECORDER.test(a)), ...process.argv.slice(1)], { env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] })
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => { child.kill(signal) })
  child.on('exit', (code, signal) => {
    if (signal !== null) { process.removeAllListeners(signal); process.kill(process.pid, signal) } else process.exit(code ?? 1)
  })
  // nothing of the file runs here: it runs in the child
  await new Promise(() => {})
}
if (process.env.MODELGATE_TEST_REEXEC === '1') {
  // the child of the above: its channel only tells it that its parent went
  delete process.env.MODELGATE_TEST_REEXEC
  process.channel?.unref()
  process.on('disconnect', () => { process.exit(1) })
}

if (/\.[cm]?ts$/.test(process.argv[1] ?? '')) await import('tsx')
