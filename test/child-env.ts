// The environment for the child processes a test starts. Tap's process recorder is taken out of
// every child's NODE_OPTIONS by the hook of test/preload.mjs, whatever environment a test gives a
// child; this one also leaves out the rest of the NODE_OPTIONS the test process itself was given.

/**
 * The environment for a child process a test starts: this one's, with `extra` on top, less the
 * NODE_OPTIONS the test runner sets to follow its own processes.
 */
export function childEnv (extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  delete env.NODE_OPTIONS
  return env
}
