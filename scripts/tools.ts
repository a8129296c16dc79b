/**
 * `npm run tools`: the Debian programs the test suite drives (kit/debian-packages.ts), installed when
 * missing. `npm run test:int` runs it first, as it runs scripts/services.ts.
 */
import { CHROMIUM, PROMTOOL, ensureDebianTools } from '../kit/debian-packages.js';

try {
  const started = Date.now();
  const installed = await ensureDebianTools([CHROMIUM, PROMTOOL]);
  if (installed.length > 0) process.stderr.write(`installed ${installed.join(', ')} (${Date.now() - started} ms)\n`);
} catch (err) {
  process.stderr.write(`tools: ${(err as Error).message}\n`);
  process.exit(1);
}
