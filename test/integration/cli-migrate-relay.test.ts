/** The CLI from the shell: migrate, and the relay with status and retry-failed. (cli.test.ts split so each file stays well inside the per-file timeout.) */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { cli, cliSchema, runCli } from '../support/cli.js';
import { appendToOutbox, withTransaction } from '../../src/index.js';
import { test, connectRabbit, uniqueName, waitFor, dropTestBroker } from '../support/rig.js';
import { LATEST_MIGRATION, migrations } from '../../src/schema/migrations.js';

const { schema, pool: testPool } = cliSchema();

test('migrate creates the schema once and reports a second run as a no-op', async () => {
  const first = await cli(['--schema', schema, 'migrate']);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, new RegExp(`applied migrations ${migrations.map((m) => m.version).join(', ')}\n`));
  const second = await cli(['--schema', schema, 'migrate']);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, new RegExp(`already at migration ${LATEST_MIGRATION}\n`));
});

test('migrate --print-sql prints the DDL without touching the database', async () => {
  const result = await cli(['--schema', 'printed_only', 'migrate', '--print-sql']);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /CREATE TABLE IF NOT EXISTS "printed_only"\.outbox/);
  const { rows } = await testPool().query(`SELECT 1 FROM pg_namespace WHERE nspname = 'printed_only'`);
  assert.equal(rows.length, 0);
});

test('an invalid schema name fails with the error code and a non-zero exit', async () => {
  const result = await cli(['--schema', 'Robert"); DROP', 'migrate']);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /CONVERGE_INVALID_IDENTIFIER/);
});

test('relay publishes the backlog and stops gracefully on SIGTERM; status and retry-failed report and requeue', async () => {
  const exchange = uniqueName('cvt.cli');
  const queue = uniqueName('cvt.cli.q');
  const connection = await connectRabbit();
  const channel = await connection.createChannel();
  try {
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, '#');
    for (let version = 1; version <= 3; version++) {
      await withTransaction(testPool(), (tx) =>
        appendToOutbox(
          tx,
          {
            aggregateType: 'order',
            aggregateId: 'cli-1',
            aggregateVersion: version,
            eventType: 'AmountAdded',
            payload: { delta: version },
          },
          { schema },
        ),
      );
    }
    await testPool()
      .query(`INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts)
                      VALUES ('failed-1', 'order', 'cli-2', 1, 'AmountAdded', '{}', 'failed', 10)`);

    const status = await cli(['--schema', schema, 'status', '--json', '--sample-ms', '50']);
    assert.equal(status.code, 2, `a failed event is a stall: ${status.stderr}`);
    const parsed = JSON.parse(status.stdout) as {
      outbox: { pending: number; failed: number };
      findings: { kind: string }[];
    };
    assert.deepEqual([parsed.outbox.pending, parsed.outbox.failed], [3, 1]);
    assert.deepEqual(
      parsed.findings.map((f) => f.kind),
      ['outbox-failed'],
    );
    const shown = await cli(['--schema', schema, 'status', '--sample-ms', '50']);
    assert.equal(shown.code, 2, shown.stderr);
    assert.match(shown.stdout, /relay\s+failed events\s+STALLED\s+1\n/);
    assert.match(shown.stdout, /look at:\s+converge outbox list --failed/);

    const retried = await cli(['--schema', schema, 'retry-failed', '--event-id', 'failed-1']);
    assert.equal(retried.code, 0, retried.stderr);
    assert.match(retried.stdout, /requeued 1 event/);

    const relay = runCli(['--schema', schema, 'relay', '--exchange', exchange, '--poll-ms', '20']);
    let stderr = '';
    relay.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitFor(async () => {
      const { rows } = await testPool().query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE status = 'published'`,
      );
      return rows[0]!.n === 4;
    }, 'the CLI relay to publish all four events');
    relay.kill('SIGTERM');
    const [code] = (await once(relay, 'exit')) as [number | null];
    assert.equal(code, 0, stderr);
    const { messageCount } = await channel.checkQueue(queue);
    assert.equal(messageCount, 4);
  } finally {
    await dropTestBroker(connection, [queue, exchange]);
    await connection.close();
  }
});
