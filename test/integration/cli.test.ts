import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendToOutbox, withTransaction } from '../../src/index.js';
import { after, before, test, DATABASE_URL, connectPostgres, connectRabbit, uniqueName, waitFor, dropTestBroker } from '../support/rig.js';
import type pg from 'pg';
import { LATEST_MIGRATION, migrations } from '../../src/schema/migrations.js';

const CLI = ['--import', 'tsx', 'src/cli/main.ts'];

function runCli(args: string[]): ChildProcess {
  return spawn(process.execPath, [...CLI, '--database-url', DATABASE_URL, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' } });
}

async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runCli(args);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

let pool: pg.Pool;
const schema = uniqueName('cvt_cli');

before(async () => {
  pool = await connectPostgres();
});

after(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

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
  const { rows } = await pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'printed_only'`);
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
      await withTransaction(pool, (tx) =>
        appendToOutbox(tx, { aggregateType: 'order', aggregateId: 'cli-1', aggregateVersion: version, eventType: 'AmountAdded', payload: { delta: version } }, { schema }),
      );
    }
    await pool.query(`INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts)
                      VALUES ('failed-1', 'order', 'cli-2', 1, 'AmountAdded', '{}', 'failed', 10)`);

    const status = await cli(['--schema', schema, 'status', '--json', '--sample-ms', '50']);
    assert.equal(status.code, 2, `a failed event is a stall: ${status.stderr}`);
    const parsed = JSON.parse(status.stdout) as { outbox: { pending: number; failed: number }; findings: { kind: string }[] };
    assert.deepEqual([parsed.outbox.pending, parsed.outbox.failed], [3, 1]);
    assert.deepEqual(parsed.findings.map((f) => f.kind), ['outbox-failed']);
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
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}".outbox WHERE status = 'published'`);
      return rows[0].n === 4;
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

test('gaps lists aggregates stuck on a missing version as a table or JSON, and exits 3 while any is open', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const clean = await cli(['--schema', schema, 'gaps']);
  assert.deepEqual([clean.code, clean.stdout.trim()], [0, 'no gaps']);
  await pool.query(
    `INSERT INTO "${schema}".parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body, parked_at)
     VALUES ('search', 'e5', 'f5', 'order_view', 'order', 'o-7', 5, 4, '{}', '\\x00', now() - interval '1 minute'),
            ('search', 'e6', 'f6', 'order_view', 'order', 'o-7', 6, 4, '{}', '\\x00', now())`,
  );
  await pool.query(`INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('order_view', 'order', 'o-7', 3)`);
  const table = await cli(['--schema', schema, 'gaps']);
  assert.equal(table.code, 3, table.stderr);
  assert.match(table.stdout, /search\s+order_view\s+order\/o-7\s+3\s+4\s+5,6\s+6\d\.\d s/);
  const json = await cli(['--schema', schema, 'gaps', '--json', '--older-than', '30000']);
  const [gap] = JSON.parse(json.stdout) as { aggregateId: string; currentVersion: number; missingVersion: number; parkedVersions: number[]; ageMs: number }[];
  assert.deepEqual([gap?.aggregateId, gap?.currentVersion, gap?.missingVersion, gap?.parkedVersions], ['o-7', 3, 4, [5, 6]]);
  assert.ok(gap!.ageMs >= 60_000);
  const recentOnly = await cli(['--schema', schema, 'gaps', '--json', '--older-than', '3600000']);
  assert.deepEqual([recentOnly.code, JSON.parse(recentOnly.stdout)], [0, []]);
});

test('reconcile reports differences (exit 4), repairs them with --repair --apply-sql, and then finds none (exit 0)', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const q = `"${schema}"`;
  await pool.query(`CREATE TABLE ${q}.src (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL)`);
  await pool.query(`CREATE TABLE ${q}.view (id text PRIMARY KEY, amount integer NOT NULL)`);
  await pool.query(`INSERT INTO ${q}.src VALUES ('a', 2, 20), ('b', 3, 30), ('c', 1, 10)`);
  await pool.query(`INSERT INTO ${q}.view VALUES ('a', 20), ('b', 25), ('c', 11)`);
  await pool.query(`INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('v', 'order', 'a', 2), ('v', 'order', 'b', 2), ('v', 'order', 'c', 1)`);
  await pool.query(`INSERT INTO ${q}.src VALUES ('d', 4, 40)`);
  await pool.query(`INSERT INTO ${q}.view VALUES ('x', 1)`);
  await pool.query(`INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('v', 'order', 'x', 1)`);
  const args = [
    '--schema', schema, 'reconcile', '--projection', 'v', '--aggregate-type', 'order', '--page-size', '2',
    '--source-sql', `SELECT id, version, amount FROM ${q}.src WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
    '--target-sql', `SELECT s.aggregate_id AS id, s.version, v.amount FROM ${q}.projection_state s JOIN ${q}.view v ON v.id = s.aggregate_id WHERE s.projection = 'v' AND s.aggregate_id COLLATE "C" > $1 ORDER BY s.aggregate_id COLLATE "C" LIMIT $2`,
  ];
  const found = await cli([...args, '--json']);
  assert.equal(found.code, 4, found.stderr);
  const report = JSON.parse(found.stdout) as { differences: Record<string, number>; samples: Record<string, string[]> };
  assert.deepEqual(report.differences, { missing: 1, stale: 1, ahead: 0, mismatch: 1, extra: 1 });
  assert.deepEqual([report.samples.missing, report.samples.stale, report.samples.mismatch], [['d'], ['b'], ['c']]);

  const repaired = await cli([
    ...args, '--repair',
    '--apply-sql', `INSERT INTO ${q}.view (id, amount) VALUES ($1, ($3::jsonb->>'amount')::int) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`,
    '--lookup-sql', `SELECT id, version, amount FROM ${q}.src WHERE id = $1`,
    '--remove-sql', `DELETE FROM ${q}.view WHERE id = $1`,
  ]);
  assert.equal(repaired.code, 0, repaired.stderr);
  assert.match(repaired.stdout, /repaired 4, skipped 0/);
  const clean = await cli(args);
  assert.equal(clean.code, 0, clean.stderr);
  assert.match(clean.stdout, /missing\s+0\n/);
  const { rows } = await pool.query(`SELECT id, amount FROM ${q}.view ORDER BY id`);
  assert.deepEqual(rows, [{ id: 'a', amount: 20 }, { id: 'b', amount: 30 }, { id: 'c', amount: 10 }, { id: 'd', amount: 40 }]);

  const refused = await cli([...args, '--repair']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /CONVERGE_INVALID_CONFIG.*apply-sql/);
});

test('rebuild forgets and empties a projection, then writes every source row at its version', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const q = `"${schema}"`;
  await pool.query(`CREATE TABLE ${q}.rb_src (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL)`);
  await pool.query(`CREATE TABLE ${q}.rb_view (id text PRIMARY KEY, amount integer NOT NULL)`);
  await pool.query(`INSERT INTO ${q}.rb_src VALUES ('a', 5, 50), ('b', 2, 20)`);
  await pool.query(`INSERT INTO ${q}.rb_view VALUES ('a', 1), ('zombie', 7)`);
  await pool.query(`INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('rb', 'order', 'a', 1), ('rb', 'order', 'zombie', 9), ('other', 'order', 'a', 4)`);
  const result = await cli([
    '--schema', schema, 'rebuild', '--projection', 'rb', '--aggregate-type', 'order',
    '--source-sql', `SELECT id, version, amount FROM ${q}.rb_src WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
    '--apply-sql', `INSERT INTO ${q}.rb_view (id, amount) SELECT id, (fields->>'amount')::int FROM converge_row`,
    '--reset-sql', `TRUNCATE ${q}.rb_view`,
  ]);
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /rebuilt rb: 2 aggregates written/);
  assert.deepEqual((await pool.query(`SELECT id, amount FROM ${q}.rb_view ORDER BY id`)).rows, [{ id: 'a', amount: 50 }, { id: 'b', amount: 20 }]);
  const state = await pool.query(`SELECT projection, aggregate_id, version FROM ${q}.projection_state WHERE projection IN ('rb', 'other') ORDER BY projection, aggregate_id`);
  assert.deepEqual(state.rows, [
    { projection: 'other', aggregate_id: 'a', version: '4' },
    { projection: 'rb', aggregate_id: 'a', version: '5' },
    { projection: 'rb', aggregate_id: 'b', version: '2' },
  ], 'other projections untouched');
});

test('cleanup deletes old published outbox rows and refuses an inbox window below the retry horizon', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await pool.query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
     SELECT 'cl-' || i, 'order', 'cl-' || i, 1, 'X', '{}', 'published', now() - interval '2 hours' FROM generate_series(1, 30) i`,
  );
  const refused = await cli(['--schema', schema, 'cleanup', '--outbox-older-than', '3600000', '--inbox-older-than', '60000', '--retry-horizon-ms', '600000', '--quarantine-window-ms', '60000']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /CONVERGE_INVALID_CONFIG: invalid option "inboxRetentionMs": 60000 ms must exceed the broker retry horizon \(600000 ms\)/);
  const done = await cli(['--schema', schema, 'cleanup', '--outbox-older-than', '3600000', '--batch-size', '7']);
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /deleted 30 outbox and 0 inbox rows in 5 batches/);
});

test('compact-inbox folds old applied inbox rows into watermarks, prints the counts (or JSON), and refuses a window inside the horizons', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await pool.query(
    `INSERT INTO "${schema}".inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
     SELECT 'cmp', 'cmp-' || v, 'f', 'order', 'cmp-1', v, 'X', now() - interval '2 hours' FROM generate_series(1, 12) v`,
  );
  await pool.query(`INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('cmp_view', 'order', 'cmp-1', 10)`);
  const base = ['--schema', schema, 'compact-inbox', '--consumer', 'cmp', '--projection', 'cmp_view', '--retry-horizon-ms', '600000', '--quarantine-window-ms', '60000'];
  const refused = await cli([...base, '--older-than', '60000']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /CONVERGE_INVALID_CONFIG: invalid option "olderThanMs": 60000 ms must exceed the broker retry horizon \(600000 ms\)/);
  const first = await cli([...base, '--older-than', '3600000', '--batch-size', '4', '--max-batches', '2']);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /compacted 8 inbox rows into 2 watermarks in 2 batches/);
  const rest = await cli([...base, '--older-than', '3600000', '--json']);
  assert.equal(rest.code, 0, rest.stderr);
  assert.deepEqual(JSON.parse(rest.stdout), { compacted: 2, watermarks: 1, batches: 1 });
  const { rows } = await pool.query(`SELECT version::int AS version FROM "${schema}".inbox_watermark WHERE consumer = 'cmp' AND aggregate_id = 'cmp-1'`);
  assert.deepEqual(rows, [{ version: 10 }], 'the applied version, not the highest recorded (12)');
});

test('outbox list shows failed (or pending) rows without payloads, and outbox retry puts them back with the same eventIds', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await pool.query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts, last_error)
     VALUES ('f-1', 'order', 'o-1', 2, 'Paid', '{"card":"4111-SECRET"}', 'failed', 10, 'CONVERGE_PUBLISH_RETURNED'),
            ('f-2', 'order', 'o-2', 1, 'Paid', '{"card":"4111-SECRET"}', 'failed', 10, 'CONVERGE_PUBLISH_NACKED')`,
  );
  const listed = await cli(['--schema', schema, 'outbox', 'list', '--failed']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /f-1\s+order\/o-1\s+2\s+Paid\s+10\s+CONVERGE_PUBLISH_RETURNED/);
  assert.doesNotMatch(listed.stdout, /SECRET/);
  const json = JSON.parse((await cli(['--schema', schema, 'outbox', 'list', '--json'])).stdout) as { eventId: string; status: string }[];
  assert.deepEqual(json.map((r) => [r.eventId, r.status]), [['f-1', 'failed'], ['f-2', 'failed']]);
  const retried = await cli(['--schema', schema, 'outbox', 'retry', '--event-id', 'f-2']);
  assert.match(retried.stdout, /requeued 1 event\(s\)/);
  const pending = JSON.parse((await cli(['--schema', schema, 'outbox', 'list', '--pending', '--json'])).stdout) as { eventId: string; attempts: number }[];
  assert.deepEqual(pending.filter((r) => r.eventId.startsWith('f-')).map((r) => [r.eventId, r.attempts]), [['f-2', 0]]);
});

test('dlq list / show / discard from the shell; the body is shown only on request, and a discard needs a reason', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO "${schema}".quarantine (consumer, event_id, reason, detail, exchange, routing_key, properties, body)
     VALUES ('search', 'q-1', 'handler-failed', 'handler failed after 10 attempts: Error: boom', 'x', 'order.Paid', '{"messageId":"q-1","type":"Paid"}', convert_to('{"card":"4111-SECRET"}', 'UTF8'))
     RETURNING id`,
  );
  const id = rows[0]!.id;
  const listed = await cli(['--schema', schema, 'dlq', 'list', '--reason', 'handler-failed']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`${id}\\s+search\\s+q-1\\s+handler-failed`));
  assert.doesNotMatch(listed.stdout, /SECRET/);
  const shown = await cli(['--schema', schema, 'dlq', 'show', id]);
  assert.doesNotMatch(shown.stdout, /SECRET/, 'no body without --body');
  assert.match((await cli(['--schema', schema, 'dlq', 'show', id, '--body'])).stdout, /4111-SECRET/);
  const noReason = await cli(['--schema', schema, 'dlq', 'discard', id]);
  assert.equal(noReason.code, 1);
  const discarded = await cli(['--schema', schema, 'dlq', 'discard', id, '--reason', 'test data']);
  assert.match(discarded.stdout, /discarded 1 message/);
  assert.match((await cli(['--schema', schema, 'dlq', 'list'])).stdout, /nothing quarantined/);
  const all = JSON.parse((await cli(['--schema', schema, 'dlq', 'list', '--all', '--json'])).stdout) as { id: string; resolution: string; resolutionNote: string }[];
  assert.deepEqual(all.filter((r) => r.id === id).map((r) => [r.resolution, r.resolutionNote]), [['discarded', 'test data']]);
});

test('dlq list --all and dlq show report what a replay did, pointing at the row a failed replay landed in', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const insert = `INSERT INTO "${schema}".quarantine (consumer, event_id, reason, detail, exchange, routing_key, properties, body, fingerprint)
                  VALUES ('search', 'q-2', 'handler-permanent', 'not yet', 'x', 'order.Paid', '{"messageId":"q-2"}', convert_to('{}', 'UTF8'), 'f') RETURNING id`;
  const original = (await pool.query<{ id: string }>(insert)).rows[0]!.id;
  await pool.query(`UPDATE "${schema}".quarantine SET resolved_at = now(), resolution = 'replayed', resolution_note = 'to q' WHERE id = $1`, [original]);
  const again = (await pool.query<{ id: string }>(insert)).rows[0]!.id;
  await pool.query(`UPDATE "${schema}".quarantine SET replay_outcome = 'quarantined', replay_outcome_at = now(), replay_quarantine_id = $2 WHERE id = $1`, [original, again]);

  const listed = await cli(['--schema', schema, 'dlq', 'list', '--all']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /replay_outcome/);
  assert.match(listed.stdout, new RegExp(`${original}\\s+search\\s+q-2\\s+handler-permanent\\s+\\d+ s\\s+replayed\\s+quarantined -> ${again}`));
  const shown = JSON.parse((await cli(['--schema', schema, 'dlq', 'show', original])).stdout) as { replayOutcome: string; replayOutcomeAt: string; replayQuarantineId: string };
  assert.equal(shown.replayOutcome, 'quarantined');
  assert.equal(shown.replayQuarantineId, again);
  assert.ok(!Number.isNaN(Date.parse(shown.replayOutcomeAt)));
  const all = JSON.parse((await cli(['--schema', schema, 'dlq', 'list', '--all', '--json'])).stdout) as { id: string; replayOutcome: string | null; replayQuarantineId: string | null }[];
  assert.deepEqual(all.filter((r) => r.id === original || r.id === again).map((r) => [r.id, r.replayOutcome, r.replayQuarantineId]), [
    [again, null, null],
    [original, 'quarantined', again],
  ]);
});
