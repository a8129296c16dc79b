import { readFileSync } from 'node:fs';

/**
 * converge's own version, from the package.json above this file: found by walking up, since the
 * CLI runs from src/cli (tsx) in development and from dist/…/cli once built or installed.
 */
export function packageVersion(from: string = import.meta.url): string {
  for (let dir = new URL('.', from); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'converge-events' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // No package.json here (or not ours): keep walking up.
    }
    if (dir.pathname === '/') return 'unknown';
  }
}
