// The key fuzz of names.test.ts at its full count, on a seed of its own: the fast suite runs a
// share of it. FUZZ_SEED and FUZZ_RUNS still replay or widen a run.
process.env.FUZZ_SEED ??= '20261208'
process.env.FUZZ_RUNS ??= '700'
await import('./names.test.js')
