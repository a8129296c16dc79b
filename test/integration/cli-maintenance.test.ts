/** The CLI from the shell: cleanup and compact-inbox. (cli.test.ts split so each file stays well inside the per-file timeout.) */
import assert from 'node:assert/strict';
import { cli, cliSchema } from '../support/cli.js';
import { test } from '../support/rig.js';

const { schema, pool: testPool } = cliSchema();

test('cleanup deletes old published outbox rows and refuses an inbox window below the retry horizon', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await testPool().query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
     SELECT 'cl-' || i, 'order', 'cl-' || i, 1, 'X', '{}', 'published', now() - interval '2 hours' FROM generate_series(1, 30) i`,
  );
  const refused = await cli([
    '--schema',
    schema,
    'cleanup',
    '--outbox-older-than',
    '3600000',
    '--inbox-older-than',
    '60000',
    '--retry-horizon-ms',
    '600000',
    '--quarantine-window-ms',
    '60000',
  ]);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /CONVERGE_INVALID_CONFIG: invalid option "inboxRetentionMs": 60000 ms must exceed the broker retry horizon \(600000 ms\)/,
  );
  const done = await cli(['--schema', schema, 'cleanup', '--outbox-older-than', '3600000', '--batch-size', '7']);
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /deleted 30 outbox and 0 inbox rows in 5 batches/);
});

test('compact-inbox folds old applied inbox rows into watermarks, prints the counts (or JSON), and refuses a window inside the horizons', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await testPool().query(
    `INSERT INTO "${schema}".inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
     SELECT 'cmp', 'cmp-' || v, 'f', 'order', 'cmp-1', v, 'X', now() - interval '2 hours' FROM generate_series(1, 12) v`,
  );
  await testPool().query(
    `INSERT INTO "${schema}".projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('cmp_view', 'order', 'cmp-1', 10)`,
  );
  const base = [
    '--schema',
    schema,
    'compact-inbox',
    '--consumer',
    'cmp',
    '--projection',
    'cmp_view',
    '--retry-horizon-ms',
    '600000',
    '--quarantine-window-ms',
    '60000',
  ];
  const refused = await cli([...base, '--older-than', '60000']);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /CONVERGE_INVALID_CONFIG: invalid option "olderThanMs": 60000 ms must exceed the broker retry horizon \(600000 ms\)/,
  );
  const first = await cli([...base, '--older-than', '3600000', '--batch-size', '4', '--max-batches', '2']);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /compacted 8 inbox rows into 2 watermarks in 2 batches/);
  assert.match(first.stderr, /warning: no broker given: inbox rows were deleted by age alone/);
  // With --queue the consumer's queues are read first; this one has none (all missing: nothing waits).
  const rest = await cli([...base, '--older-than', '3600000', '--json', '--queue', `cmp-absent-${process.pid}`]);
  assert.equal(rest.code, 0, rest.stderr);
  assert.deepEqual(JSON.parse(rest.stdout), {
    compacted: 2,
    watermarks: 1,
    batches: 1,
    broker: { status: 'empty', queue: null, oldestMessageAgeMs: null, appliedRetentionMs: 3_600_000 },
  });
  const { rows } = await testPool().query(
    `SELECT version::int AS version FROM "${schema}".inbox_watermark WHERE consumer = 'cmp' AND aggregate_id = 'cmp-1'`,
  );
  assert.deepEqual(rows, [{ version: 10 }], 'the applied version, not the highest recorded (12)');
});
