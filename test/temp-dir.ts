import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// Temporary folders for a test file's databases, configs and packed tarballs. They are removed
// when the test file's process exits, after its gateways and child processes have been closed
// (a teardown could remove a folder a gateway it has not stopped yet still writes into).

const made: string[] = []
process.once('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true })
})

/** A new empty folder under the system's temporary folder, named `mg-<name>-XXXXXX`. */
export function tempDir (name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `mg-${name}-`))
  made.push(dir)
  return dir
}
