// Preloaded into the gateway by alloc.ts (node --import): V8's sampling heap profiler, keeping the
// samples of objects the collector has since freed (a call's garbage is what this looks for). The
// first SIGUSR2 starts sampling; the second writes the profile to $ALLOC_PROFILE and stops.
import { Session } from 'node:inspector'
import { writeFileSync } from 'node:fs'

const session = new Session()
session.connect()
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, res) => err ? reject(err) : resolve(res)))
let sampling = false
process.on('SIGUSR2', async () => {
  if (!sampling) {
    sampling = true
    await post('HeapProfiler.startSampling', { samplingInterval: Number(process.env.ALLOC_INTERVAL ?? 1024), includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
    process.stderr.write('alloc-probe: sampling\n')
    return
  }
  const { profile } = await post('HeapProfiler.stopSampling', {})
  sampling = false
  writeFileSync(process.env.ALLOC_PROFILE, JSON.stringify(profile))
  process.stderr.write('alloc-probe: written\n')
})
