/**
 * What every reference generator shares: a generated page is current when the committed file
 * equals what the code renders, and each generator script either writes its page or, with
 * `--check` (npm run docs:check), fails when the committed page is stale. `--file <path>`
 * points either at another file (the unit tests use it on a scratch copy).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** True when the file at `path` holds exactly what `render` produces (false if it is missing). */
export function isCurrent(path: string, render: () => string): boolean {
  let committed = '';
  try {
    committed = readFileSync(path, 'utf8');
  } catch {
    return false;
  }
  return committed === render();
}

/** Runs the generator when its module is the script node was started with; a no-op when imported. */
export function runGenerator(moduleUrl: string, defaultPath: string, render: () => string): void {
  if (!process.argv[1] || fileURLToPath(moduleUrl) !== process.argv[1]) return;
  const fileFlag = process.argv.indexOf('--file');
  const target = fileFlag > 0 && process.argv[fileFlag + 1] ? process.argv[fileFlag + 1]! : defaultPath;
  if (process.argv.includes('--check')) {
    if (!isCurrent(target, render)) {
      console.error(`docs:check: ${target} is out of date; run npm run docs`);
      process.exitCode = 1;
    }
  } else {
    writeFileSync(target, render());
    console.log(`wrote ${target}`);
  }
}
