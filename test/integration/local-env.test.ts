// test-files: heavy, starts PostgreSQL 18 servers of its own
/**
 * scripts/local-env.ts, the setup `npm run lab` and `npm run demo` run first: with DATABASE_URL
 * unset and nothing answering at the probed address (a closed port here, through the script's
 * CONVERGE_PROBE_DATABASE_URL; the shared server is never touched), it starts an embedded
 * PostgreSQL 18, hands its URL to the command, and removes it when the command ends, also when
 * the command fails. A configured DATABASE_URL that does not answer fails instead.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../kit/ports.js';
import { amqpTarget, postgresTarget } from '../../scripts/services.js';
import { refused } from '../support/port-probe.js';
import { AMQP_URL, DATABASE_URL, describe, test } from '../support/rig.js';

/** The command local-env runs: reports where its DATABASE_URL leads, then exits with `code`. */
const probeScript = (code: number) => `
  import pg from 'pg';
  const client = new pg.Client(process.env.DATABASE_URL);
  await client.connect();
  const { rows } = await client.query("SELECT current_setting('server_version') AS version, current_setting('data_directory') AS dir");
  await client.end();
  console.log(JSON.stringify({ url: process.env.DATABASE_URL, amqp: process.env.AMQP_URL, ...rows[0] }));
  process.exit(${code});`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function localEnv(env: NodeJS.ProcessEnv, command: string[]): Promise<Run> {
  return localEnvWith([], env, command);
}

function localEnvWith(flags: string[], env: NodeJS.ProcessEnv, command: string[]): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/local-env.ts', ...flags, '--', ...command], {
    env: { ...process.env, DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('local-env: embedded PostgreSQL when nothing answers', () => {
  for (const code of [0, 3]) {
    test(`starts an embedded PostgreSQL 18, runs the command on it, removes it (command exits ${code})`, async () => {
      const closed = await freePort();
      const run = await localEnv({ CONVERGE_PROBE_DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/test` }, [
        process.execPath,
        '--input-type=module',
        '-e',
        probeScript(code),
      ]);
      assert.equal(run.code, code, `exits as the command did; stderr: ${run.stderr}`);
      assert.match(
        run.stderr,
        /^PostgreSQL: embedded 18\.\d+ \(temporary, removed at exit; started in [\d.]+ s\) · RabbitMQ: /m,
      );
      const seen = JSON.parse(run.stdout) as { url: string; version: string; dir: string };
      const port = Number(new URL(seen.url).port);
      // Not "port !== closed": the probe released that port, and the embedded server asks the OS for a
      // free one, which may be the same. What the command reached is told by the server itself: version
      // 18 (the shared server is 15) in a temporary directory of local-env's own.
      assert.notEqual(port, 5432, 'not the shared server');
      assert.match(seen.version, /^18\./);
      const directory = path.dirname(seen.dir);
      assert.match(path.basename(directory), /^converge-pg-/);
      assert.equal(existsSync(directory), false, 'temporary directory removed');
      assert.ok(await refused(port), 'embedded server stopped');
    });
  }

  test('a configured DATABASE_URL that does not answer is an error, not an embedded server', async () => {
    const closed = await freePort();
    const run = await localEnv({ DATABASE_URL: `postgres://postgres@127.0.0.1:${closed}/test` }, ['true']);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /local-env: DATABASE_URL is set, and PostgreSQL at /);
    assert.doesNotMatch(run.stderr, /embedded/);
  });

  test('a configured AMQP_URL on a port the local node does not serve is an error, not the in-process transport', async () => {
    const closed = await freePort();
    const run = await localEnvWith(
      ['--in-process'],
      { DATABASE_URL, AMQP_URL: `amqp://guest:guest@127.0.0.1:${closed}` },
      ['true'],
    );
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      new RegExp(
        `local-env: AMQP_URL is set, and RabbitMQ at \\S+: the local RabbitMQ node is running but accepts AMQP on [\\d, ]+, not on ${closed}`,
      ),
    );
    assert.doesNotMatch(run.stderr, /in-process/);
  });

  test('the real services are used when they answer', async () => {
    const run = await localEnv({ DATABASE_URL, AMQP_URL }, [
      process.execPath,
      '--input-type=module',
      '-e',
      probeScript(0),
    ]);
    assert.equal(run.code, 0, run.stderr);
    const line = `PostgreSQL: ${postgresTarget(DATABASE_URL).where} · RabbitMQ: ${amqpTarget(AMQP_URL).where}`;
    assert.ok(run.stderr.split('\n').includes(line), run.stderr);
    assert.deepEqual(JSON.parse(run.stdout) as { url: string; amqp: string }, {
      ...(JSON.parse(run.stdout) as object),
      url: DATABASE_URL,
      amqp: AMQP_URL,
    });
  });
});

/**
 * `npm run lab` and `npm run demo` with nothing answering at the default addresses (closed local ports
 * stand in for stopped services; the launcher only probes the defaults, it never starts them), so it
 * starts an embedded PostgreSQL and hands the program the in-process transport.
 */
describe('local-env: nothing installed, lab and demo on embedded PostgreSQL + in-process transport', () => {
  async function nothingInstalled(): Promise<NodeJS.ProcessEnv> {
    return {
      AMQP_URL: '',
      CONVERGE_PROBE_DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/test`,
      CONVERGE_PROBE_AMQP_URL: `amqp://guest:guest@127.0.0.1:${await freePort()}`,
    };
  }
  const firstLine =
    /^PostgreSQL: embedded 18\.\d+ \(temporary, removed at exit; started in [\d.]+ s\) · RabbitMQ: in-process \(no broker reachable at 127\.0\.0\.1:\d+\)$/;

  test('npm run lab: 6 passed, 0 failed', async () => {
    const run = await localEnvWith(['--in-process'], await nothingInstalled(), [
      process.execPath,
      '--import',
      'tsx',
      'scripts/lab.ts',
    ]);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stderr.split('\n')[0] ?? '', firstLine, run.stderr);
    const lines = run.stdout.trimEnd().split('\n');
    assert.deepEqual(lines.slice(-2), ['published=2 deliveries=3 applied=1 inbox=1 amount=10', '6 passed, 0 failed']);
    assert.equal(lines.filter((line) => line.startsWith('ok   ')).length, 6, run.stdout);
  });

  test('npm run demo --duration 5: check: converged', async () => {
    const run = await localEnvWith(['--in-process'], await nothingInstalled(), [
      process.execPath,
      '--import',
      'tsx',
      'scripts/demo/main.ts',
      '--duration',
      '5',
    ]);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stderr.split('\n')[0] ?? '', firstLine, run.stderr);
    const lines = run.stdout.trimEnd().split('\n');
    const check = lines.find((line) => line.startsWith('check: '));
    assert.match(check ?? '', /^check: converged: [1-9]\d* orders, search and statistics equal the source/, run.stdout);
    const load = lines.find((line) => line.startsWith('load: ')) ?? '';
    assert.match(load, / 0 failed$/, load);
    assert.match(lines.at(-1) ?? '', /^cleanup: removed schema \S+, exchange \S+, queues \S+ \S+$/);
  });
});
