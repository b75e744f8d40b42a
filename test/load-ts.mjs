// Preloaded into every test process (`node-arg` in package.json). `npm test` runs the built tests
// (.build/, by test/build.mjs) and needs nothing; a test file given as TypeScript
// (`npx tap test/x.test.ts`) runs from its sources, so tsx is registered for it alone.
if (/\.[cm]?ts$/.test(process.argv[1] ?? '')) await import('tsx')
