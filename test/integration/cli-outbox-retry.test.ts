/**
 * The CLI from the shell (issue 26, defect 1): after an upgrade left an old row failed because it breaks
 * a rule, `converge outbox retry` still retries the other failed rows, names the refused one and exits 3,
 * and `converge status` says why each failed row is failed (failedReasons), in the table and in --json.
 */
import assert from 'node:assert/strict';
import { cli, cliSchema } from '../support/cli.js';
import { migrateTo } from '../support/migrate-to.js';
import { test } from '../support/rig.js';

const { schema, pool: testPool } = cliSchema();

const MIGRATED = 'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (migration 17)';
const NOT_RETRIED =
  'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (SQLSTATE 23514) on outbox retry';
const escape = (text: string) => text.replace(/[()]/g, '\\$&');

interface StatusJson {
  outbox: { failed: number; failedReasons: Record<string, number> };
}

async function status(): Promise<{ json: StatusJson; human: string }> {
  const json = await cli(['--schema', schema, 'status', '--json', '--sample-ms', '50']);
  assert.equal(json.code, 2, `failed events are a stall: ${json.stderr}`);
  const human = await cli(['--schema', schema, 'status', '--sample-ms', '50']);
  assert.equal(human.code, 2, human.stderr);
  return { json: JSON.parse(json.stdout) as StatusJson, human: human.stdout };
}

test('outbox retry retries the good failed rows beside one the table refuses, names it and exits 3; status shows why each row failed', async () => {
  // A release before migration 17 with a pending row that breaks the event-type rule (written before the rule).
  await migrateTo(testPool(), schema, 16);
  await testPool().query(`ALTER TABLE "${schema}".outbox DROP CONSTRAINT outbox_envelope_event_type`);
  await testPool().query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
     VALUES ('bad-1', 'order', 'o-bad', 1, 'Order Paid', '{"card":"4111-SECRET"}')`,
  );
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await testPool().query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts, last_error)
     VALUES ('good-1', 'order', 'o-1', 1, 'OrderPaid', '{"card":"4111-SECRET"}', 'failed', 10, 'CONVERGE_PUBLISH_RETURNED'),
            ('good-2', 'order', 'o-2', 1, 'OrderPaid', '{"card":"4111-SECRET"}', 'failed', 10, 'CONVERGE_PUBLISH_RETURNED')`,
  );

  const upgraded = await status();
  assert.deepEqual(upgraded.json.outbox.failedReasons, { CONVERGE_PUBLISH_RETURNED: 2, [MIGRATED]: 1 });
  assert.match(upgraded.human, /failed events\s+reason \(last_error\)\n/);
  assert.match(upgraded.human, new RegExp(`\\n2\\s+CONVERGE_PUBLISH_RETURNED\\n`));
  assert.match(upgraded.human, new RegExp(`\\n1\\s+${escape(MIGRATED)}`));

  const retried = await cli(['--schema', schema, 'outbox', 'retry']);
  assert.equal(retried.code, 3, `refused rows exit 3: ${retried.stderr}`);
  assert.match(retried.stdout, /requeued 2 event\(s\)/);
  assert.match(retried.stdout, /refused 1 event\(s\): .*fix each row's data, then retry/);
  assert.match(
    retried.stdout,
    /position\s+event id\s+constraint\s+SQLSTATE\n[0-9]+\s+bad-1\s+outbox_envelope_event_type\s+23514/,
  );
  assert.doesNotMatch(retried.stdout + retried.stderr, /SECRET|Order Paid/);

  const { rows } = await testPool().query<{ event_id: string; status: string }>(
    `SELECT event_id, status FROM "${schema}".outbox ORDER BY event_id`,
  );
  assert.deepEqual(
    rows.map((row) => [row.event_id, row.status]),
    [
      ['bad-1', 'failed'],
      ['good-1', 'pending'],
      ['good-2', 'pending'],
    ],
  );

  const json = await cli(['--schema', schema, 'outbox', 'retry', '--json']);
  assert.equal(json.code, 3, json.stderr);
  const parsed = JSON.parse(json.stdout) as {
    retried: string[];
    refused: { eventId: string; constraint: string; sqlState: string; reason: string }[];
  };
  assert.deepEqual(parsed.retried, []);
  assert.deepEqual(
    parsed.refused.map(({ eventId, constraint, sqlState, reason }) => ({ eventId, constraint, sqlState, reason })),
    [{ eventId: 'bad-1', constraint: 'outbox_envelope_event_type', sqlState: '23514', reason: NOT_RETRIED }],
  );

  const after = await status();
  assert.deepEqual(after.json.outbox.failedReasons, { [NOT_RETRIED]: 1 });
  assert.match(after.human, new RegExp(`\\n1\\s+${escape(NOT_RETRIED)}`));

  // Fix the row's data (a failed row may break the rules), then retry: the older name works the same.
  await testPool().query(`UPDATE "${schema}".outbox SET event_type = 'OrderPaid' WHERE event_id = 'bad-1'`);
  const fixed = await cli(['--schema', schema, 'retry-failed']);
  assert.equal(fixed.code, 0, fixed.stderr);
  assert.equal(fixed.stdout, 'requeued 1 event(s)\n');
});
