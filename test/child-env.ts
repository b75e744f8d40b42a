/**
 * The environment for a child process a test starts: this one's, with `extra` on top, less the
 * NODE_OPTIONS the test runner sets to follow its own processes (a loader in every child that
 * doubles the time a short command takes to start, and that no child of a test needs).
 */
export function childEnv (extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  delete env.NODE_OPTIONS
  return env
}
