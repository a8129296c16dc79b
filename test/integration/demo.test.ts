// test-files: heavy, runs the demo's fleet of processes
// test-files: session, the demo's processes prepare statements by name (the demo sets no pool mode)
/**
 * `npm run demo` in a short mode against the real services: the orders API under load for a few
 * seconds, then the projections converge to the source and the demo removes what it created.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  connectRabbit,
  describe,
  existingBrokerObjects,
  existingSchemas,
  test,
} from '../support/rig.js';

function demo(seconds: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/local-env.ts',
      '--in-process',
      '--',
      process.execPath,
      '--import',
      'tsx',
      'scripts/demo/main.ts',
      '--duration',
      String(seconds),
    ],
    { env: { ...process.env, DATABASE_URL, AMQP_URL }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('demo', () => {
  test('drives the orders API, converges, and cleans up (--duration 5)', async () => {
    const run = await demo(5);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    const lines = run.stdout.split('\n');
    const check = lines.find((line) => line.startsWith('check: '));
    assert.match(check ?? '', /^check: converged: [1-9]\d* orders, search and statistics equal the source/, run.stdout);
    assert.ok(
      lines.some((line) => /^\s*\d+ s {2}orders written \d+ {2}outbox pending \d+/.test(line)),
      'live view lines',
    );
    const load = lines.find((line) => line.startsWith('load: ')) ?? '';
    assert.match(load, / 0 failed$/, load);

    // What the demo created is gone: its schema, its exchange and its queues (with their companions).
    const removed = /^cleanup: removed schema (\S+), exchange (\S+), queues (\S+) (\S+)$/m.exec(run.stdout);
    assert.ok(removed, run.stdout);
    const [, schema, ...brokerNames] = removed as unknown as [string, string, ...string[]];
    const pool = await connectPostgres(1);
    const connection = await connectRabbit();
    try {
      assert.deepEqual(await existingSchemas(pool, [schema]), [], 'schema dropped');
      assert.deepEqual(await existingBrokerObjects(connection, brokerNames), [], 'exchange and queues deleted');
    } finally {
      await pool.end();
      await connection.close();
    }
  });
});
