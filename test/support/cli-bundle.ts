/**
 * How the integration tests start `converge`: src/cli/main.ts bundled by esbuild into one file
 * (npm packages stay external and load from node_modules, as they do for the published package),
 * run by plain node. Under tsx every start resolved and transformed a few hundred modules: about
 * 0.65 s on a quiet machine and over 1.5 s with four test files running, times some seventy
 * starts. The bundle starts in about 0.25 s. It is built once per test process, from the sources
 * as they are now, and stored under a name made of its content, so parallel files never write
 * the same name with different content and a stale bundle is never run.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Inside the checkout, so packageVersion() walks up to converge's package.json and the bare
// imports resolve from its node_modules.
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'converge-test-cli');

let bundled: string | undefined;

function bundle(): string {
  const { outputFiles } = buildSync({
    entryPoints: [path.join(ROOT, 'src/cli/main.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'inline',
    write: false,
    logLevel: 'error',
  });
  const code = outputFiles[0]!.contents;
  const file = path.join(CACHE, `cli-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    mkdirSync(CACHE, { recursive: true });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, code);
    renameSync(partial, file);
  }
  return file;
}

/** node's arguments that start the CLI (the command's own arguments follow). */
export function cliNodeArgs(): string[] {
  bundled ??= bundle();
  // Stack traces of a failing command point into src/, not into the bundle.
  return ['--enable-source-maps', bundled];
}
