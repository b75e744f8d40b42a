import neostandard from 'neostandard'
import tseslint from 'typescript-eslint'

// The project's lint: neostandard (the standard style with typescript-eslint, what Fastify's own
// projects use), and, on the TypeScript sources, the rules that need type information and catch
// real bugs in a server: promises left floating or handed where a callback is expected, awaits of
// non-promises, and `any` flowing across module boundaries.

export default [
  ...neostandard({
    ts: true,
    ignores: ['dist/**', '.dist-staging-*/**', '.build/**', 'node_modules/**', 'test/agents/**', 'test/fixtures/**', 'bench/results/**', 'data/**', 'test-output/**', 'examples/**/node_modules/**']
  }),
  { rules: { 'no-void': ['error', { allowAsStatement: true }] } },
  {
    files: ['**/*.ts'],
    ignores: ['routes/console/web/**'],
    languageOptions: {
      parserOptions: { project: ['./tsconfig.json', './tsconfig.test.json'], tsconfigRootDir: import.meta.dirname }
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-non-null-assertion': 'error',
      // `void promise` marks a promise left running on purpose (what no-floating-promises asks for)
      'no-void': ['error', { allowAsStatement: true }]
    }
  },
  {
    // tap queues every t.test() and awaits it itself: a subtest is no floating promise; a test reads
    // answers it has just asserted the shape of (`any`, `!`)
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      // tests write the config file's own ${VAR} syntax
      'no-template-curly-in-string': 'off',
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [{ from: 'package', name: ['test', 'only', 'skip', 'todo'], package: '@tapjs/core' }, { from: 'package', name: ['test', 'only', 'skip', 'todo'], package: 'tap' }, { from: 'package', name: ['test', 'only', 'skip', 'todo'], package: '@tapjs/test' }] }]
    }
  }
]
