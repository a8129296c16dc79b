// test-files: session, the previous release (library, CLI and workers) prepares statements by name and has no pool mode
/**
 * A rolling upgrade from the previous release (test/fixtures/previous-release.tgz, built by
 * scripts/fixtures/previous-release.ts) to this code, on one schema, one exchange and one queue,
 * in the order docs/upgrading.md ("The order of a rolling upgrade") gives:
 *   1. the previous release migrates and runs a relay and a consumer with traffic;
 *   2. this release's relay refuses the old schema; this release's migrate runs while the old relay
 *      and consumer work; the previous release's migrate then refuses the newer schema, and its
 *      relay and consumer restart on it;
 *   3. a new relay starts beside the old one while only the old consumer runs: new relay → old consumer;
 *   4. a new consumer starts beside the old one: all four run;
 *   5. the old consumer stops while the old relay still runs: old relay → new consumer;
 *   6. the old relay stops: new relay → new consumer.
 * Producers alternate both releases' appendToOutbox. Every event must apply exactly once, in
 * version order per aggregate, with nothing pending, parked or quarantined.
 */
import assert from 'node:assert/strict';
import { migrate } from '../../src/schema/migrate.js';
import { LATEST_MIGRATION } from '../../src/schema/migrations.js';
import * as current from '../../src/index.js';
import { connectPostgres, test, uniqueName, waitFor } from '../support/rig.js';
import { Worker, Writer, previousCli, unpackPreviousRelease, type Names } from '../support/rolling-rig.js';

/** The last migration of the previous release (3ed8c5d). */
const PREVIOUS_MIGRATION = 16;

test('the previous release and this one run side by side through a migration: nothing lost, nothing applied twice', async () => {
  const release = await unpackPreviousRelease();
  const pool = await connectPostgres();
  const names: Names = {
    schema: uniqueName('cvt_roll'),
    exchange: uniqueName('cvt.roll.events'),
    queue: uniqueName('cvt.roll.q'),
  };
  const { schema } = names;
  const workers: Worker[] = [];
  const spawnWorker = (tag: string, role: 'relay' | 'consumer', code: string) => {
    const worker = new Worker(tag, role, code, names);
    workers.push(worker);
    return worker;
  };
  const start = async (tag: string, role: 'relay' | 'consumer', code: string) => {
    const worker = spawnWorker(tag, role, code);
    await worker.ready();
    return worker;
  };
  const writer = new Writer(pool, schema, [release.library, current]);
  const applied = async () => {
    const { rows } = await pool.query<{ event_id: string; consumer: string }>(
      `SELECT event_id, consumer FROM "${schema}".rolling_log`,
    );
    return new Map(rows.map((row) => [row.event_id, row.consumer]));
  };
  const allApplied = (description: string) =>
    waitFor(async () => (await applied()).size === writer.written.length, description, 20_000);
  /** Writes rounds of events until one published by `relay` was applied by `consumer`. */
  const until = async (relay: Worker, consumer: string) => {
    for (let round = 0; round < 25; round++) {
      const batch = await writer.write(4);
      await allApplied(`${relay.tag} → ${consumer}, round ${round}`);
      const seen = await applied();
      if (batch.some((e) => relay.published.has(e.eventId) && seen.get(e.eventId) === consumer)) return;
    }
    assert.fail(`no event went from ${relay.tag} to ${consumer} in 25 rounds`);
  };

  try {
    // 1. The previous release creates the schema at its last migration and runs with traffic.
    const created = await previousCli(release, ['--schema', schema, 'migrate']);
    assert.match(created.stdout, new RegExp(`applied migrations .*\\b${PREVIOUS_MIGRATION}\n`));
    await pool.query(`CREATE TABLE "${schema}".rolling_totals (id text PRIMARY KEY, total int NOT NULL, version int NOT NULL);
      CREATE TABLE "${schema}".rolling_log (seq bigserial PRIMARY KEY, event_id text NOT NULL, aggregate_id text NOT NULL,
        version int NOT NULL, consumer text NOT NULL)`);
    let [oldRelay, oldConsumer] = await Promise.all([
      start('old-relay', 'relay', release.dist),
      start('old-consumer', 'consumer', release.dist),
    ]);
    await writer.write(8);
    await allApplied('the previous release alone');

    // 2. This release's code refuses the old schema; its migrate runs while the old relay and consumer carry traffic.
    const early = spawnWorker('new-relay-before-migrate', 'relay', 'src');
    await assert.rejects(early.ready(), /CONVERGE_SCHEMA_NOT_MIGRATED/);
    const [upgrade] = await Promise.all([migrate(pool, { schema }), writer.write(12)]);
    assert.ok(upgrade.applied.length >= 1, `the upgrade went through no migration (both at ${PREVIOUS_MIGRATION})`);
    assert.deepEqual(
      upgrade.applied,
      Array.from({ length: LATEST_MIGRATION - PREVIOUS_MIGRATION }, (_, i) => PREVIOUS_MIGRATION + 1 + i),
    );
    await writer.write(4);
    await allApplied('the previous release on the migrated schema');
    // The previous release's migrate refuses the newer schema; its relay and consumer restart on it.
    const refused = await previousCli(release, ['--schema', schema, 'migrate']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /CONVERGE_SCHEMA_TOO_NEW/);
    await Promise.all([oldRelay.stop(), oldConsumer.stop()]);
    [oldRelay, oldConsumer] = await Promise.all([
      start('old-relay', 'relay', release.dist),
      start('old-consumer', 'consumer', release.dist),
    ]);
    await writer.write(4);
    await allApplied('the previous release restarted on the migrated schema');

    // 3. New relay beside the old one; the old consumer is the only one: new relay → old consumer.
    const newRelay = await start('new-relay', 'relay', 'src');
    await until(newRelay, 'old-consumer');

    // 4. New consumer beside the old one: both releases on both sides.
    const newConsumer = await start('new-consumer', 'consumer', 'src');
    await writer.write(16);
    await allApplied('both releases side by side');

    // 5. The old consumer stops; the old relay still runs: old relay → new consumer.
    await oldConsumer.stop();
    await until(oldRelay, 'new-consumer');

    // 6. The old relay stops; the new ones carry on alone.
    await oldRelay.stop();
    await writer.write(8);
    await allApplied('this release alone');
    await Promise.all([newRelay.stop(), newConsumer.stop()]);

    await assertConverged(pool, names, writer);
  } finally {
    await Promise.all(workers.map((worker) => worker.kill()));
    await pool.end();
    await release.remove();
  }
});

async function assertConverged(pool: import('pg').Pool, { schema, queue }: Names, writer: Writer): Promise<void> {
  const total = writer.written.length;
  const log = await pool.query<{ event_id: string; aggregate_id: string; version: number }>(
    `SELECT event_id, aggregate_id, version FROM "${schema}".rolling_log ORDER BY seq`,
  );
  assert.equal(new Set(log.rows.map((row) => row.event_id)).size, total, 'every event applied');
  assert.equal(log.rows.length, total, 'no event applied twice');
  const expected = new Map<string, { versions: number[]; total: number }>();
  for (const event of writer.written) {
    const entry = expected.get(event.aggregateId) ?? { versions: [], total: 0 };
    entry.versions.push(event.version);
    entry.total += event.delta;
    expected.set(event.aggregateId, entry);
  }
  for (const [aggregateId, { versions }] of expected) {
    const order = log.rows.filter((row) => row.aggregate_id === aggregateId).map((row) => row.version);
    assert.deepEqual(order, versions, `${aggregateId} applied in version order`);
  }
  const totals = await pool.query<{ id: string; total: number; version: number }>(
    `SELECT id, total, version FROM "${schema}".rolling_totals ORDER BY id`,
  );
  assert.deepEqual(
    totals.rows,
    [...expected]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, e]) => ({ id, total: e.total, version: e.versions.length })),
  );
  const inbox = await pool.query<{ consumer: string; rows: number; events: number }>(
    `SELECT consumer, count(*)::int AS rows, count(DISTINCT event_id)::int AS events FROM "${schema}".inbox GROUP BY consumer`,
  );
  assert.deepEqual(inbox.rows, [{ consumer: queue, rows: total, events: total }], 'the inbox holds each eventId once');
  const left = await pool.query<{ pending: number; parked: number; quarantined: number }>(
    `SELECT (SELECT count(*)::int FROM "${schema}".outbox WHERE status <> 'published') AS pending,
            (SELECT count(*)::int FROM "${schema}".parked) AS parked,
            (SELECT count(*)::int FROM "${schema}".quarantine) AS quarantined`,
  );
  assert.deepEqual(left.rows[0], { pending: 0, parked: 0, quarantined: 0 });
}
