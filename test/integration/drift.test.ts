// test-files: session, scripts/drift.ts runs as a process of its own that prepares statements by name
/** `npm run scenario:drift` end to end (smaller), so the drift repair stays part of every test run. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { test } from '../support/rig.js';

const run = promisify(execFile);

test('scenario:drift finds and repairs every corruption it made while the consumer runs, and leaves nothing', async () => {
  const { stdout, stderr } = await run(
    process.execPath,
    ['--import', 'tsx', 'scripts/drift.ts', '--orders', '600', '--seed', '11'],
    { timeout: 120_000 },
  );
  const last = stdout.trim().split('\n').pop();
  assert.equal(last, 'found=24 repaired=24 remaining=0', stderr);
});
