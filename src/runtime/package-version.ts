import { readFileSync } from 'node:fs';

/**
 * converge's own version, from the package.json above this file: found by walking up, since the
 * code runs from src/ (tsx) in development and from dist/ once built or installed. The CLI's
 * --version and the OpenTelemetry tracer's version both come from here.
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
