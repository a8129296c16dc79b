/**
 * The test rig itself: a failed test's schema, queue and exchange are dropped by default and
 * kept (with their names printed) under CONVERGE_KEEP_FAILED=1. Runs a failing fixture file
 * in a child process both ways and looks at what is left on the servers.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  connectPostgres,
  connectRabbit,
  describe,
  dropBrokerNames,
  dropSchemas,
  existingBrokerObjects,
  existingSchemas,
  it,
} from '../support/rig.js';

const FIXTURE = fileURLToPath(new URL('../support/fixtures/failing.fixture.ts', import.meta.url));
const LEAKY_FIXTURE = fileURLToPath(new URL('../support/fixtures/leaky.fixture.ts', import.meta.url));

interface FixtureRun {
  code: number | null;
  output: string;
  names: { schema: string; exchange: string; queue: string };
}

function runFixture(keep: boolean): Promise<FixtureRun> {
  const env = { ...process.env };
  delete env.CONVERGE_KEEP_FAILED;
  delete env.NODE_TEST_CONTEXT; // run as a top-level test file, not as part of this one
  if (keep) env.CONVERGE_KEEP_FAILED = '1';
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', '--test-reporter=tap', FIXTURE],
      { env, timeout: 110_000 },
      (err, stdout, stderr) => {
        const output = `${stdout}\n${stderr}`;
        const line = /FIXTURE-NAMES (\{.*\})/.exec(output);
        if (!line) return reject(new Error(`the fixture printed no names: ${output}`));
        resolve({
          code: err ? ((err as { code?: number }).code ?? 1) : 0,
          output,
          names: JSON.parse(line[1]!) as FixtureRun['names'],
        });
      },
    );
    child.stdin?.end();
  });
}

async function leftOver(names: FixtureRun['names']): Promise<{ schemas: string[]; broker: string[] }> {
  const pool = await connectPostgres(1);
  const connection = await connectRabbit();
  try {
    return {
      schemas: await existingSchemas(pool, [names.schema]),
      broker: await existingBrokerObjects(connection, [names.exchange, names.queue]),
    };
  } finally {
    await connection.close();
    await pool.end();
  }
}

describe('test rig', () => {
  it('drops a failed test’s schema, queue and exchange by default', async () => {
    const run = await runFixture(false);
    assert.notEqual(run.code, 0, 'the fixture test fails');
    assert.match(run.output, /this test fails on purpose/);
    assert.doesNotMatch(run.output, /CONVERGE_KEEP_FAILED: /);
    assert.deepEqual(await leftOver(run.names), { schemas: [], broker: [] });
  });

  it('keeps them under CONVERGE_KEEP_FAILED=1, prints their names, and the leak check lets them be', async () => {
    const run = await runFixture(true);
    try {
      assert.notEqual(run.code, 0, 'the fixture test fails');
      const { schema, exchange, queue } = run.names;
      assert.match(
        run.output,
        new RegExp(
          `CONVERGE_KEEP_FAILED: "fails after making a schema, an exchange and a queue" failed; kept .*schema ${schema}`,
        ),
      );
      assert.match(run.output, new RegExp(`queue ${queue.replaceAll('.', '\\.')}`));
      assert.match(run.output, new RegExp(`exchange ${exchange.replaceAll('.', '\\.')}`));
      assert.doesNotMatch(
        run.output,
        /every (schema|queue and exchange) this file created/,
        'the leak check does not count kept objects',
      );
      assert.deepEqual(await leftOver(run.names), {
        schemas: [schema],
        broker: [`exchange ${exchange}`, `queue ${queue}`],
      });
    } finally {
      const pool = await connectPostgres(1);
      const connection = await connectRabbit();
      await dropSchemas(pool, [run.names.schema]);
      await dropBrokerNames(connection, [run.names.exchange, run.names.queue]);
      await connection.close();
      await pool.end();
    }
  });
  it('fails the file when a test leaves a pool open or a timer pending', async () => {
    const env = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const output = await new Promise<{ code: number; text: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', '--test-reporter=tap', LEAKY_FIXTURE],
        { env, timeout: 110_000 },
        (err, stdout, stderr) => resolve({ code: err ? 1 : 0, text: `${stdout}\n${stderr}` }),
      );
    });
    assert.equal(output.code, 1, 'the file fails although its only test passed');
    assert.match(output.text, /ok 1 - passes, but leaves a pool open and a timer pending/);
    assert.match(output.text, /1 pool\(s\) opened through the rig were not ended/);
    assert.match(output.text, /1 timer\(s\) left behind/);
  });
});
