// test-files: heavy, runs a chaos pass: relays and consumers as processes, kills and restarts
// test-files: session, its workers prepare statements by name (session pool mode) and its faults kill backends
/**
 * The chaos suite's check must be able to fail: a short run with a few kills, then one defect
 * of each kind planted after quiescence, must be reported as exactly those defects (and exit 1).
 * The real runs are `npm run chaos` (and a one-minute pass in .ci/run).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from '../support/rig.js';

test('npm run chaos reports planted defects: lost=1 double_applied=1 mismatched=2 stuck=1, exit 1', async () => {
  const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [
        '--import',
        'tsx',
        'chaos/run.ts',
        '--duration',
        '8',
        '--seed',
        '5',
        '--faults',
        'kill-consumer,kill-relay',
        '--orders',
        '50',
        '--sabotage',
      ],
      { timeout: 110_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  const last = result.stdout.trim().split('\n').pop() ?? '';
  // The projection total skewed by one is seen twice: by the direct comparison and by the reconciler.
  assert.match(
    last,
    /^faults=\d+ events=\d+ lost=1 double_applied=1 mismatched=2 stuck=1$/,
    `${result.stdout}\n${result.stderr}`,
  );
  assert.equal(result.code, 1);
  assert.match(result.stdout, /reproduce with: npm run chaos -- --seed 5/);
});
