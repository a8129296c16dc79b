/** The CLI from the shell: outbox list/retry and dlq. (cli.test.ts split so each file stays well inside the per-file timeout.) */
import assert from 'node:assert/strict';
import { cli, cliSchema } from '../support/cli.js';
import { test } from '../support/rig.js';

const { schema, pool: testPool } = cliSchema();

test('outbox list shows failed (or pending) rows without payloads, and outbox retry puts them back with the same eventIds', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  await testPool().query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts, broker_retries, last_error)
     VALUES ('f-1', 'order', 'o-1', 2, 'Paid', '{"card":"4111-SECRET"}', 'failed', 10, 3, 'CONVERGE_PUBLISH_RETURNED'),
            ('f-2', 'order', 'o-2', 1, 'Paid', '{"card":"4111-SECRET"}', 'failed', 10, 7, 'CONVERGE_PUBLISH_RETURNED')`,
  );
  const listed = await cli(['--schema', schema, 'outbox', 'list', '--failed']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /f-1\s+order\/o-1\s+2\s+Paid\s+10\s+3\s+CONVERGE_PUBLISH_RETURNED/);
  assert.doesNotMatch(listed.stdout, /SECRET/);
  const json = JSON.parse((await cli(['--schema', schema, 'outbox', 'list', '--json'])).stdout) as {
    eventId: string;
    status: string;
  }[];
  assert.deepEqual(
    json.map((r) => [r.eventId, r.status]),
    [
      ['f-1', 'failed'],
      ['f-2', 'failed'],
    ],
  );
  const retried = await cli(['--schema', schema, 'outbox', 'retry', '--event-id', 'f-2']);
  assert.match(retried.stdout, /requeued 1 event\(s\)/);
  const pending = JSON.parse((await cli(['--schema', schema, 'outbox', 'list', '--pending', '--json'])).stdout) as {
    eventId: string;
    attempts: number;
    brokerRetries: number;
  }[];
  assert.deepEqual(
    pending.filter((r) => r.eventId.startsWith('f-')).map((r) => [r.eventId, r.attempts, r.brokerRetries]),
    [['f-2', 0, 0]],
  );
});

test('dlq list / show / discard from the shell; the body is shown only on request (unmasked only with --show-sensitive), and a discard needs a reason', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const { rows } = await testPool().query<{ id: string }>(
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
  // The message says nothing about its fields (no x-converge-sensitive header): --body masks them all.
  const masked = await cli(['--schema', schema, 'dlq', 'show', id, '--body']);
  assert.doesNotMatch(masked.stdout, /SECRET/);
  assert.equal((JSON.parse(masked.stdout) as { body: string }).body, '[redacted]');
  assert.match((await cli(['--schema', schema, 'dlq', 'show', id, '--show-sensitive'])).stdout, /4111-SECRET/);
  const noReason = await cli(['--schema', schema, 'dlq', 'discard', id]);
  assert.equal(noReason.code, 1);
  const discarded = await cli(['--schema', schema, 'dlq', 'discard', id, '--reason', 'test data']);
  assert.match(discarded.stdout, /discarded 1 message/);
  assert.match((await cli(['--schema', schema, 'dlq', 'list'])).stdout, /nothing quarantined/);
  const all = JSON.parse((await cli(['--schema', schema, 'dlq', 'list', '--all', '--json'])).stdout) as {
    id: string;
    resolution: string;
    resolutionNote: string;
  }[];
  assert.deepEqual(
    all.filter((r) => r.id === id).map((r) => [r.resolution, r.resolutionNote]),
    [['discarded', 'test data']],
  );
});

test('dlq list --all and dlq show report what a replay did, pointing at the row a failed replay landed in', async () => {
  const migrated = await cli(['--schema', schema, 'migrate']);
  assert.equal(migrated.code, 0, migrated.stderr);
  const insert = `INSERT INTO "${schema}".quarantine (consumer, event_id, reason, detail, exchange, routing_key, properties, body, fingerprint)
                  VALUES ('search', 'q-2', 'handler-permanent', 'not yet', 'x', 'order.Paid', '{"messageId":"q-2"}', convert_to('{}', 'UTF8'), 'f') RETURNING id`;
  const original = (await testPool().query<{ id: string }>(insert)).rows[0]!.id;
  await testPool().query(
    `UPDATE "${schema}".quarantine SET resolved_at = now(), resolution = 'replayed', resolution_note = 'to q' WHERE id = $1`,
    [original],
  );
  const again = (await testPool().query<{ id: string }>(insert)).rows[0]!.id;
  await testPool().query(
    `UPDATE "${schema}".quarantine SET replay_outcome = 'quarantined', replay_outcome_at = now(), replay_quarantine_id = $2 WHERE id = $1`,
    [original, again],
  );

  const listed = await cli(['--schema', schema, 'dlq', 'list', '--all']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /replay_outcome/);
  assert.match(
    listed.stdout,
    new RegExp(`${original}\\s+search\\s+q-2\\s+handler-permanent\\s+\\d+ s\\s+replayed\\s+quarantined -> ${again}`),
  );
  const shown = JSON.parse((await cli(['--schema', schema, 'dlq', 'show', original])).stdout) as {
    replayOutcome: string;
    replayOutcomeAt: string;
    replayQuarantineId: string;
  };
  assert.equal(shown.replayOutcome, 'quarantined');
  assert.equal(shown.replayQuarantineId, again);
  assert.ok(!Number.isNaN(Date.parse(shown.replayOutcomeAt)));
  const all = JSON.parse((await cli(['--schema', schema, 'dlq', 'list', '--all', '--json'])).stdout) as {
    id: string;
    replayOutcome: string | null;
    replayQuarantineId: string | null;
  }[];
  assert.deepEqual(
    all.filter((r) => r.id === original || r.id === again).map((r) => [r.id, r.replayOutcome, r.replayQuarantineId]),
    [
      [again, null, null],
      [original, 'quarantined', again],
    ],
  );
});
