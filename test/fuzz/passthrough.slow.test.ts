// The pass-through fuzz of passthrough.test.ts at its full count (25 gateways for the headers),
// on a seed of its own: the fast suite runs a share of it. FUZZ_SEED and FUZZ_RUNS still replay
// or widen a run.
process.env.FUZZ_SEED ??= '20261208'
process.env.FUZZ_RUNS ??= '300'
await import('./passthrough.test.js')
