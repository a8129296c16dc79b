/**
 * Schema rollouts against PostgreSQL and RabbitMQ: consumers register the versions they read when
 * they subscribe, `checkCompat` / `converge compat` and the producer guard read the registry, and
 * the rollback check finds what older code cannot read in the outbox, in flight and in quarantine.
 */
import assert from 'node:assert/strict';
import {
  appendToOutbox,
  createCompatGuard,
  withTransaction,
  type EventHandler,
  type NewEvent,
} from '../../src/index.js';
import { IncompatibleSchemaVersionError } from '../../src/errors.js';
import { checkCompat, findUnreadable, listRegistry } from '../../src/ops/index.js';
import { cli } from '../support/cli.js';
import { envelope, withEnv, type Env } from '../support/consumer-env.js';
import { test, waitFor } from '../support/rig.js';

const handled: EventHandler = async () => undefined;
const up = (payload: unknown) => payload;

/** A consumer reading OrderPaid 1..current (one upcaster per older version). */
function startReading(env: Env, current: number) {
  const upcasters = Object.fromEntries(Array.from({ length: current - 1 }, (_, i) => [i + 1, up]));
  return env.start({ handlers: { OrderPaid: handled }, schemas: { OrderPaid: { current, upcasters } } });
}

const paid = (aggregateId: string, schemaVersion: number): NewEvent => ({
  aggregateType: 'order',
  aggregateId,
  aggregateVersion: 1,
  eventType: 'OrderPaid',
  schemaVersion,
  payload: { amount: 10 },
});

test('a consumer registers what it reads; compat and the producer guard refuse v3 until it reads v3', async () => {
  await withEnv(async (env) => {
    const { schema, pool, queue } = env;
    const v2 = startReading(env, 2);
    await v2.ready();
    const [row] = await listRegistry(pool, { schema });
    assert.deepEqual([row?.consumer, row?.queue, row?.accepts, row?.running], [queue, queue, 'OrderPaid:1-2', true]);

    const refused = await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 3 });
    assert.equal(refused.compatible, false);
    assert.deepEqual(
      refused.consumers.map((c) => [c.consumer, c.reads]),
      [[queue, false]],
    );
    assert.equal((await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 2 })).compatible, true);

    // The guard refuses in the caller's transaction, before anything is appended.
    const guard = createCompatGuard({ schema, cacheTtlMs: 0 });
    const append = (event: NewEvent) =>
      withTransaction(pool, async (tx) => {
        await guard.check(tx, event);
        await appendToOutbox(tx, event, { schema });
      });
    await assert.rejects(append(paid('o-1', 3)), (err: unknown) => {
      assert.ok(err instanceof IncompatibleSchemaVersionError, String(err));
      assert.deepEqual(err.consumers, [queue]);
      return true;
    });
    assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.outbox`), 0);

    // Rolled out with v3 support: the stopped v2 instance no longer counts.
    await env.stop(v2);
    const v3 = startReading(env, 3);
    await v3.ready();
    assert.equal((await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 3 })).compatible, true);
    await append(paid('o-1', 3));
    assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.outbox WHERE schema_version = 3`), 1);
    assert.deepEqual(
      (await listRegistry(pool, { schema })).map((r) => [r.accepts, r.running, r.stoppedAt !== null]),
      [
        ['OrderPaid:1-3', true, false],
        ['OrderPaid:1-2', false, true],
      ],
    );

    // A consumer down for good: counted while its newest row is inside the live window, ignored after.
    await pool.query(
      `INSERT INTO "${schema}".consumer_schemas (consumer, instance, accepts, last_seen_at, stopped_at)
       VALUES ('legacy', 'h:1:x', 'OrderPaid:1', now() - interval '25 hours', now() - interval '25 hours')`,
    );
    const ignoring = await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 3 });
    assert.equal(ignoring.compatible, true);
    assert.deepEqual(
      ignoring.stale.map((s) => s.consumer),
      ['legacy'],
    );
    await pool.query(
      `UPDATE "${schema}".consumer_schemas SET last_seen_at = now() - interval '1 hour' WHERE consumer = 'legacy'`,
    );
    const counting = await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 3 });
    assert.deepEqual(
      counting.consumers.filter((c) => !c.reads).map((c) => c.consumer),
      ['legacy'],
    );
    assert.equal(
      (await checkCompat(pool, { schema, eventType: 'OrderPaid', schemaVersion: 3, liveWithinMs: 1_800_000 }))
        .compatible,
      true,
      'a shorter live window leaves it out',
    );
  });
});

test('rollback check: a v3 event pending, one published but not in the inbox, one quarantined; converge compat from the shell', async () => {
  await withEnv(async (env) => {
    const { schema, pool, queue } = env;
    const consumer = startReading(env, 2);
    await consumer.ready();
    // Quarantined by the running v1-2 code, as it would be after a rollback.
    await env.publish({ ...envelope('q-v3', 'o-q', 1, { amount: 1 }, 'OrderPaid'), schemaVersion: 3 });
    const quarantineId = await waitFor(async () => {
      const { rows } = await pool.query<{ id: string }>(
        `SELECT id FROM "${schema}".quarantine WHERE event_id = 'q-v3' AND schema_version = 3 AND event_type = 'OrderPaid'`,
      );
      return rows[0]?.id;
    }, 'the v3 event quarantined');
    await withTransaction(pool, (tx) => appendToOutbox(tx, { ...paid('o-p', 3), eventId: 'pending-v3' }, { schema }));
    // Published rows: one still on its way, one already read, one readable by the old code; and the quarantined one.
    await pool.query(
      `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, schema_version, payload, status, published_at)
       VALUES ('flight-v3', 'order', 'o-f', 1, 'OrderPaid', 3, '{}', 'published', now()),
              ('done-v3', 'order', 'o-d', 1, 'OrderPaid', 3, '{}', 'published', now()),
              ('flight-v2', 'order', 'o-2', 1, 'OrderPaid', 2, '{}', 'published', now()),
              ('q-v3', 'order', 'o-q', 1, 'OrderPaid', 3, '{}', 'published', now())`,
    );
    await pool.query(
      `INSERT INTO "${schema}".inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type)
       VALUES ($1, 'done-v3', 'f', 'order', 'o-d', 1, 'OrderPaid')`,
      [queue],
    );

    const report = await findUnreadable(pool, { schema, accepts: 'OrderPaid:1-2', consumer: queue });
    const groups = (list: typeof report.outbox) => list.map((g) => [g.eventType, g.schemaVersion, g.count, g.ids]);
    assert.deepEqual(groups(report.outbox), [['OrderPaid', 3, 1, ['pending-v3']]]);
    assert.deepEqual(groups(report.inFlight), [['OrderPaid', 3, 1, ['flight-v3']]]);
    assert.deepEqual(groups(report.quarantine), [['OrderPaid', 3, 1, [quarantineId]]]);
    assert.equal(report.total, 3);
    assert.equal((await findUnreadable(pool, { schema, accepts: 'OrderPaid:1-3', consumer: queue })).total, 0);

    const rollback = await cli([
      '--schema',
      schema,
      'compat',
      '--rollback',
      '--accepts',
      'OrderPaid:1-2',
      '--consumer',
      queue,
      '--json',
    ]);
    assert.equal(rollback.code, 3, rollback.stderr);
    assert.equal((JSON.parse(rollback.stdout) as { total: number }).total, 3);
    assert.doesNotMatch(rollback.stdout, /amount/, 'never payloads');
    const no = await cli(['--schema', schema, 'compat', '--event-type', 'OrderPaid', '--schema-version', '3']);
    assert.equal(no.code, 3, no.stderr);
    assert.match(no.stdout, new RegExp(`NOT compatible, not read by ${queue.replaceAll('.', '\\.')}`));
    const yes = await cli([
      '--schema',
      schema,
      'compat',
      '--event-type',
      'OrderPaid',
      '--schema-version',
      '2',
      '--json',
    ]);
    assert.equal(yes.code, 0, yes.stderr);
    assert.equal((JSON.parse(yes.stdout) as { compatible: boolean }).compatible, true);
  });
});
