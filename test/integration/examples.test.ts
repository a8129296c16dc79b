// test-files: heavy, runs each example as a process of its own
// test-files: session, each example is a program of its own that prepares statements by name (none sets a pool mode)
/**
 * The programs in examples/ run as a user would run them: each as its own process (tsx, with
 * examples/tsconfig.json mapping `converge-events` to src/), against the real services, on a
 * schema, exchange and queue of this test passed through the environment. Long-running ones are
 * stopped with SIGTERM and must exit 0 after their graceful stop.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { AMQP_URL, DATABASE_URL, connectPostgres, registry, test, uniqueName, waitFor } from '../support/rig.js';

const TSCONFIG = 'examples/tsconfig.json';

interface Example {
  child: ChildProcess;
  output: () => string;
}

/** Starts `examples/<name>.ts`; stdout and stderr are collected for failure messages and waits. */
function start(name: string, env: Record<string, string>, args: string[] = []): Example {
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${name}.ts`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TSX_TSCONFIG_PATH: TSCONFIG, DATABASE_URL, AMQP_URL, ...env },
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

async function exitCode(example: Example): Promise<number | null> {
  if (example.child.exitCode !== null) return example.child.exitCode;
  const [code] = (await once(example.child, 'exit')) as [number | null];
  return code;
}

/** Runs a short-lived example to completion and returns its output; a non-zero exit fails with it. */
async function run(name: string, env: Record<string, string>, args: string[]): Promise<string> {
  const example = start(name, env, args);
  const code = await exitCode(example);
  assert.equal(code, 0, `examples/${name}.ts ${args.join(' ')} exited ${code}:\n${example.output()}`);
  return example.output();
}

/** SIGTERM, then the exit code of the graceful stop. */
async function stop(example: Example): Promise<number | null> {
  if (example.child.exitCode === null) example.child.kill('SIGTERM');
  return exitCode(example);
}

/** Stops every example still running, even when the test failed half way. */
async function stopAll(examples: Example[]): Promise<void> {
  for (const example of examples) if (example.child.exitCode === null) example.child.kill('SIGKILL');
  await Promise.all(examples.map((example) => exitCode(example)));
}

async function totals(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ id: string; amount: number }>(
    `SELECT id, amount FROM ${pg.escapeIdentifier(schema)}.order_totals ORDER BY id`,
  );
  return Object.fromEntries(rows.map((row) => [row.id, row.amount]));
}

async function versions(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ aggregate_id: string; version: string }>(
    `SELECT aggregate_id, version FROM ${pg.escapeIdentifier(schema)}.projection_state ORDER BY aggregate_id`,
  );
  return Object.fromEntries(rows.map((row) => [row.aggregate_id, Number(row.version)]));
}

/** Whether the read-model table exists yet (the consumer creates it at start). */
async function hasTotals(pool: pg.Pool, schema: string): Promise<boolean> {
  const { rows } = await pool.query<{ found: string | null }>(`SELECT to_regclass($1) AS found`, [
    `${pg.escapeIdentifier(schema)}.order_totals`,
  ]);
  return rows[0]?.found !== null;
}

test('service, relay and consumer examples: business rows and events to a projection, first event included', async () => {
  const schema = uniqueName('exs');
  const env = { EXAMPLE_SCHEMA: schema, EXAMPLE_EXCHANGE: uniqueName('exx'), EXAMPLE_QUEUE: uniqueName('exq') };
  const pool = await connectPostgres(2);
  const running: Example[] = [];
  try {
    assert.match(await run('service', env, ['place', 'o-1', '10']), /order o-1 at version 1/);
    assert.match(await run('service', env, ['add', 'o-1', '5']), /order o-1 at version 2/);

    // The consumer first, so its queue is bound before the relay publishes (unroutable events would wait).
    const consumer = start('consumer', env);
    running.push(consumer);
    await waitFor(() => consumer.output().includes('consumer ready'), 'the consumer example to subscribe', 60_000);
    const relay = start('relay', env);
    running.push(relay);

    // The order placed before anything consumed it, and one placed while everything runs.
    assert.match(await run('service', env, ['place', 'o-2', '7']), /order o-2 at version 1/);
    await waitFor(
      async () => JSON.stringify(await totals(pool, schema)) === JSON.stringify({ 'o-1': 15, 'o-2': 7 }),
      'order_totals o-1=15, o-2=7',
      60_000,
    );
    assert.deepEqual(await versions(pool, schema), { 'o-1': 2, 'o-2': 1 });
    assert.equal(await stop(relay), 0, `relay example exit:\n${relay.output()}`);
    assert.equal(await stop(consumer), 0, `consumer example exit:\n${consumer.output()}`);
    assert.match(relay.output(), /published \d+ event\(s\)/);
  } finally {
    await stopAll(running);
    await pool.end();
  }
});

test('partitioned consumers example: every order applied whole and in version order', async () => {
  const schema = uniqueName('exs');
  const queuePrefix = uniqueName('exp');
  const partitions = 2;
  // Names the topology derives from the prefix, so the rig drops them and checks none is left.
  for (let p = 0; p < partitions; p++) registry.name(`${queuePrefix}.p${p}`);
  registry.name(`${queuePrefix}.by-aggregate`);
  const env = {
    EXAMPLE_SCHEMA: schema,
    EXAMPLE_EXCHANGE: uniqueName('exx'),
    EXAMPLE_QUEUE_PREFIX: queuePrefix,
    EXAMPLE_PARTITIONS: String(partitions),
  };
  const pool = await connectPostgres(2);
  const running: Example[] = [];
  try {
    const consumers = start('partitioned', env);
    running.push(consumers);
    await waitFor(
      () => consumers.output().includes(`${partitions} partition consumers ready`),
      'the partitioned example to subscribe',
      60_000,
    );
    assert.ok(await hasTotals(pool, schema), 'the example created its read model');
    const orders = ['a-1', 'a-2', 'a-3'];
    for (const order of orders) {
      await run('service', env, ['place', order, '1']);
      await run('service', env, ['add', order, '2']);
    }
    const relay = start('relay', env);
    running.push(relay);
    const expected = Object.fromEntries(orders.map((order) => [order, 3]));
    await waitFor(
      async () => JSON.stringify(await totals(pool, schema)) === JSON.stringify(expected),
      'order_totals of every order = 3',
      60_000,
    );
    assert.deepEqual(await versions(pool, schema), Object.fromEntries(orders.map((order) => [order, 2])));
    assert.equal(await stop(relay), 0, `relay example exit:\n${relay.output()}`);
    assert.equal(await stop(consumers), 0, `partitioned example exit:\n${consumers.output()}`);
  } finally {
    await stopAll(running);
    await pool.end();
  }
});
