// Preloaded into every test process (`node-arg` in package.json).
//
// 1. Tap preloads its process recorder (@tapjs/processinfo) into each test process and, through
//    the process-on-spawn hook, adds it to the NODE_OPTIONS of every process a test starts,
//    whatever environment the test gave it: a gateway's MCP stdio server, `npm pack` and the
//    scripts npm runs, a CLI command, a store opened by six processes at once. In a child the
//    recorder costs more than the child's own start (a module-loading thread, and a record of
//    every file it loads), and no test reads what it records (coverage is off). So a hook that runs
//    after tap's takes it out of every child's NODE_OPTIONS again, leaving any other option there.
// 2. `npm test` runs the built tests (.build/, by test/build.mjs); a test file given as TypeScript
//    (`npx tap test/x.test.ts`) runs from its sources, so tsx is registered for it alone.
const state = globalThis[Symbol.for('process-on-spawn@*:singletonId')]
// NODE_OPTIONS as tap writes it: each option in double quotes ("--import=file:///…/import.mjs")
const OPTION = /"(?:[^"\\]|\\.)*"|\S+/g
const RECORDER = /^"?--(import|loader|experimental-loader)=[^"]*@tapjs[\\/]processinfo[\\/]/
if (state !== undefined && !state.listeners.some((l) => l.recorderOut === true)) {
  state.listeners.push(Object.assign((opts) => {
    const options = opts.env?.NODE_OPTIONS
    if (options === undefined) return
    const kept = (options.match(OPTION) ?? []).filter((o) => !RECORDER.test(o))
    if (kept.length === 0) delete opts.env.NODE_OPTIONS
    else opts.env.NODE_OPTIONS = kept.join(' ')
  }, { recorderOut: true }))
}

if (/\.[cm]?ts$/.test(process.argv[1] ?? '')) await import('tsx')
