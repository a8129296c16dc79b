// ESLint flat config: typescript-eslint with type information over every TypeScript tree.
// Formatting is Prettier's job (`prettier --check .` in `npm run lint`), so no stylistic rules here.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.bench/', '.scratch/', 'bin/', '*.config.js', '*.cjs'] },
  {
    // Every TypeScript file; one outside tsconfig.json's include fails, so a new folder joins both.
    files: ['**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Off: `async` without `await` is deliberate here — it matches Promise-returning handler and hook
      // signatures and turns a synchronous throw into a rejection. The promise rules below catch real misuse.
      '@typescript-eslint/require-await': 'off',
      // `_`-prefixed names mark parameters a signature needs but the body does not use.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // node:test's test()/describe() return promises the runner itself awaits; every other promise must be handled.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'it', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    // A source file over 350 lines holds more than one job: split it by concept (CONTRIBUTING.md).
    // Blank lines and comments count, as `wc -l` counts them.
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 350, skipBlankLines: false, skipComments: false }] },
  },
  {
    // The dashboard's browser code (its own tsconfig, DOM types, bundled by scripts/dashboard/build.ts):
    // data reaches the page as text only, and the program imports nothing outside its folder.
    files: ['src/dashboard/client/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML'].map((property) => ({
          property,
          message: 'Set textContent: no data from the API may become markup.',
        })),
        { object: 'document', property: 'write', message: 'Set textContent: no data may become markup.' },
      ],
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['../*', 'node:*'], message: 'Browser code imports its own folder only.' }] },
      ],
    },
  },
);
