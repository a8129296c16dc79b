/**
 * `readPipelineStatus` against real services: each stall kind of the diagnosis table is
 * staged on its own (a source change without its event, an old unpublished outbox, a
 * backlog nobody consumes, inbox rows that never reach the projection, a missing version),
 * then undone, and status must point at exactly that stage.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, performEffect, retryFailedEffect, withTransaction } from '../../src/index.js';
import { PermanentError } from '../../src/errors.js';
import { readPipelineStatus, type PipelineStatus, type PipelineStatusOptions } from '../../src/ops/index.js';
import { openBrokerFixture, type BrokerFixture } from '../support/broker-fixture.js';
import pg from 'pg';
import {
  after,
  before,
  describe,
  it,
  uniqueName,
  waitFor,
  type TestDatabase,
  AMQP_URL,
  DIRECT_DATABASE_URL,
} from '../support/rig.js';

describe('pipeline status', () => {
  let fixture: BrokerFixture;
  let db: TestDatabase;
  let channel: BrokerFixture['channel'];
  let queue: string;

  before(async () => {
    fixture = await openBrokerFixture('cvps');
    ({ db, channel, queue } = fixture);
    await channel.assertQueue(queue, { durable: false });
    await db.pool.query(
      `CREATE TABLE "${db.schema}".orders (id text PRIMARY KEY, version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
    );
  });

  after(async () => {
    await fixture?.close();
  });

  const status = (options: Partial<PipelineStatusOptions> = {}): Promise<PipelineStatus> =>
    readPipelineStatus(db.pool, {
      schema: db.schema,
      amqpUrl: AMQP_URL,
      sampleMs: 100,
      stallAfterMs: 30_000,
      ...options,
    });
  const kinds = (s: PipelineStatus) => s.findings.map((f) => f.kind);
  const sql = (text: string, params: unknown[] = []) =>
    db.pool.query(text.replaceAll('$schema', `"${db.schema}"`), params);

  /** A business change and its event on one transaction, as the producer must do it. */
  const placeOrder = (id: string, version: number) =>
    withTransaction(db.pool, async (tx) => {
      await tx.query(
        `INSERT INTO "${db.schema}".orders (id, version) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, updated_at = now()`,
        [id, version],
      );
      await appendToOutbox(
        tx,
        { aggregateType: 'order', aggregateId: id, aggregateVersion: version, eventType: 'OrderChanged', payload: {} },
        { schema: db.schema },
      );
    });
  const publishAll = () =>
    sql(`UPDATE $schema.outbox SET status = 'published', published_at = now() WHERE status = 'pending'`);

  it('finds no stall in an idle, consistent pipeline', async () => {
    await placeOrder('o1', 1);
    await publishAll();
    const s = await status({
      sources: [{ table: `${db.schema}.orders`, aggregateType: 'order' }],
      queues: [{ queue }],
    });
    assert.deepEqual(s.findings, []);
    assert.equal(s.stalled, false);
    assert.deepEqual(s.sources, [{ source: `${db.schema}.orders`, aggregateType: 'order', ahead: 0, sampleIds: [] }]);
    assert.equal(s.queues[0]!.depth, 0);
    assert.equal(s.outbox.throughput.drainSeconds, 0);
  });

  it('a transaction left open is a vacuum-horizon warning naming its pid and state, gone once it ends', async () => {
    // A session of its own, straight to PostgreSQL: through a transaction-mode pooler the server connection
    // would serve other clients' statements once the transaction ended, and they would hold its pid.
    const holder = new pg.Client({ connectionString: DIRECT_DATABASE_URL });
    await holder.connect();
    const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const subject = (f: { subject?: string }) => f.subject?.split(' ')[1] === String(rows[0]!.pid);
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT 1');
      // Other files' transactions may be further behind for a moment: the five oldest are listed.
      let held: PipelineStatus | undefined;
      await waitFor(async () => {
        held = await status({ sampleMs: 0, horizonWarnAfterMs: 1 });
        return held.findings.some(subject);
      }, 'the open transaction named');
      const finding = held!.findings.find(subject)!;
      assert.equal(finding.kind, 'vacuum-horizon-held');
      assert.equal(finding.stage, 'database');
      assert.equal(finding.severity, 'warning');
      assert.match(finding.evidence, /^a transaction \(idle in transaction\) has held the xmin horizon for [\d.]+ s/);
      assert.equal(held!.stalled, false, 'a warning, not a stall');
      const quiet = await status({ sampleMs: 0 });
      assert.equal(quiet.findings.some(subject), false, 'under the default threshold (5 minutes) it is not judged');
      assert.ok(
        quiet.horizon.holders.some((h) => h.kind === 'transaction'),
        'but listed among the holders',
      );
    } finally {
      await holder.query('COMMIT');
      await holder.end();
    }
    const ended = await status({ sampleMs: 0, horizonWarnAfterMs: 1 });
    assert.equal(ended.findings.some(subject), false, 'the ended transaction is no longer named');
  });

  it('reads once without options beyond the schema: no rates, no rate-based findings, a queue backlog still counted', async () => {
    await placeOrder('o-once', 1);
    const s = await readPipelineStatus(db.pool, { schema: db.schema, amqpUrl: AMQP_URL, queues: [{ queue }] });
    assert.equal(s.sampleSeconds, 0);
    assert.equal(s.outbox.arrivalPerSecond, null);
    assert.equal(s.outbox.throughput.completionPerSecond, null);
    assert.equal(s.outbox.pending, 1);
    assert.equal(s.queues[0]!.completedPerSecond, null);
    assert.equal(s.queues[0]!.depth, 0);
    assert.deepEqual(kinds(s), [], 'a young pending event is not a stall, and no rate is judged');
    await publishAll();
  });

  it('source changed without an outbox event → producer', async () => {
    await sql(`UPDATE $schema.orders SET version = 2, updated_at = now() WHERE id = 'o1'`);
    const s = await status({
      sources: [{ table: `${db.schema}.orders`, aggregateType: 'order', changedAtColumn: 'updated_at' }],
    });
    assert.deepEqual(kinds(s), ['source-without-event']);
    assert.equal(s.findings[0]!.stage, 'producer');
    assert.deepEqual(s.sources[0]!.sampleIds, ['o1']);
    // Outside the lookback the same row is not checked (its events may have been cleaned up).
    await sql(`UPDATE $schema.orders SET updated_at = now() - interval '2 hours' WHERE id = 'o1'`);
    assert.deepEqual(
      kinds(
        await status({
          sources: [{ table: `${db.schema}.orders`, aggregateType: 'order', changedAtColumn: 'updated_at' }],
        }),
      ),
      [],
    );
    // Recovery: the event for version 2 exists.
    await withTransaction(db.pool, (tx) =>
      appendToOutbox(
        tx,
        { aggregateType: 'order', aggregateId: 'o1', aggregateVersion: 2, eventType: 'OrderChanged', payload: {} },
        { schema: db.schema },
      ),
    );
    await publishAll();
    assert.deepEqual(kinds(await status({ sources: [{ table: `${db.schema}.orders`, aggregateType: 'order' }] })), []);
  });

  it('unpublished outbox growing and old → relay, with appended and published rates; failed rows too', async () => {
    await placeOrder('o2', 1);
    await sql(`UPDATE $schema.outbox SET occurred_at = now() - interval '10 minutes' WHERE aggregate_id = 'o2'`);
    // Appends during the sample show up as arrivals that nothing publishes.
    const appending = (async () => {
      for (let v = 1; v <= 5; v++) await placeOrder(`o3-${v}`, 1);
    })();
    const s = await status({ sampleMs: 300 });
    await appending;
    assert.deepEqual(kinds(s), ['outbox-growing']);
    const finding = s.findings[0]!;
    assert.deepEqual([finding.stage, finding.severity], ['relay', 'stalled']);
    assert.ok(s.outbox.oldestPendingAgeSeconds! >= 600, `oldest ${s.outbox.oldestPendingAgeSeconds}`);
    assert.equal(s.outbox.throughput.completionPerSecond, 0);
    assert.equal(s.outbox.throughput.drainSeconds, null, 'nothing publishes, so it never drains');
    assert.match(finding.evidence, /unpublished .* oldest 6\d\d s/);

    await sql(`UPDATE $schema.outbox SET status = 'failed', attempts = 10 WHERE aggregate_id = 'o2'`);
    await publishAll();
    const failed = await status();
    assert.deepEqual(kinds(failed), ['outbox-failed']);
    assert.equal(failed.failures.outboxFailed, 1);
    await sql(`UPDATE $schema.outbox SET status = 'published', published_at = now() WHERE aggregate_id = 'o2'`);
  });

  it('broker backlog while the inbox does not grow → consumer; a missing queue → broker', async () => {
    for (let i = 0; i < 3; i++) channel.sendToQueue(queue, Buffer.from('{}'));
    await channel.checkQueue(queue); // a round trip: the three messages are in the queue now
    const missing = uniqueName('cvps-missing');
    const s = await status({ queues: [{ queue, consumer: 'search' }, { queue: missing }] });
    assert.deepEqual(kinds(s), ['broker-backlog', 'queue-missing']);
    assert.deepEqual(
      s.findings.map((f) => [f.stage, f.subject]),
      [
        ['consumer', queue],
        ['broker', missing],
      ],
    );
    assert.match(s.findings[0]!.evidence, /3 ready message\(s\), 0 subscriber\(s\)/);
    assert.equal(s.queues[0]!.throughput.drainSeconds, null);
    await channel.purgeQueue(queue);
    assert.deepEqual(kinds(await status({ queues: [{ queue, consumer: 'search' }] })), []);
  });

  it('inbox growing while the projection does not change → projection; lag percentiles from the inbox', async () => {
    const inbox = (consumer: string, n: number, lagSeconds: number) =>
      sql(
        `INSERT INTO $schema.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, occurred_at)
         SELECT $1, $1 || '-' || i, 'f', 'order', 'x' || i, 1, 'OrderChanged', now() - make_interval(secs => $3) FROM generate_series(1, $2) AS i`,
        [consumer, n, lagSeconds],
      );
    await inbox('search', 4, 2);
    await inbox('stats', 4, 0.5);
    await sql(
      `INSERT INTO $schema.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ('order_stats', 'order', 'x1', 1)`,
    );
    const s = await status({
      queues: [
        { queue, consumer: 'search', projection: 'order_search' },
        { queue, consumer: 'stats', projection: 'order_stats' },
      ],
    });
    assert.deepEqual(kinds(s), ['inbox-without-projection']);
    assert.match(s.findings[0]!.evidence, /4 inbox row\(s\) for search .* no change to projection order_search/);
    const lag = Object.fromEntries(s.lag.map((l) => [l.consumer, l]));
    assert.equal(lag.search!.events, 4);
    assert.ok(lag.search!.p50Seconds >= 2 && lag.search!.p99Seconds < 10, `search p50 ${lag.search!.p50Seconds}`);
    assert.ok(lag.stats!.p99Seconds >= 0.5 && lag.stats!.p99Seconds < 2, `stats p99 ${lag.stats!.p99Seconds}`);
    await sql(`DELETE FROM $schema.inbox`);
  });

  it('aggregates stuck on a missing version → ordering; open quarantine is a warning', async () => {
    await sql(
      `INSERT INTO $schema.parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body, parked_at)
       VALUES ('search', 'p5', 'f', 'order_search', 'order', 'o9', 5, 4, '{}', '\\x00', now() - interval '2 minutes'),
              ('search', 'p6', 'f', 'order_search', 'order', 'o8', 2, 1, '{}', '\\x00', now())`,
    );
    await sql(
      `INSERT INTO $schema.quarantine (consumer, event_id, reason, detail, properties, body) VALUES ('search', 'q1', 'handler-permanent', 'd', '{}', '\\x00')`,
    );
    const s = await status();
    assert.deepEqual(kinds(s), ['missing-versions', 'quarantined']);
    assert.deepEqual(
      s.gaps.sample.map((g) => [g.aggregateId, g.currentVersion, g.parkedVersions]),
      [['o9', 0, [5]]],
      'o8 has waited only a moment',
    );
    assert.equal(s.gaps.parked, 2);
    assert.equal(s.stalled, true);
    await sql(`DELETE FROM $schema.parked`);
    await sql(`DELETE FROM $schema.quarantine`);
    assert.equal((await status()).stalled, false);
  });

  it('remote effects failed for good, and pending ones whose outcome was never recorded, are warnings naming the effect', async () => {
    const failed = await performEffect(db.pool, {
      schema: db.schema,
      event: { eventId: 'e-1' },
      effect: 'send-sms',
      call: () => Promise.reject(new PermanentError('number unknown')),
    });
    assert.equal(failed.status, 'failed');
    // A worker that died between the call and its record leaves the key pending; this one did so 2 minutes ago.
    await sql(
      `INSERT INTO $schema.effects (key, effect, event_id, status, attempts, first_called_at, last_called_at)
       VALUES ('k-crashed', 'charge-card', 'e-2', 'pending', 1, now() - interval '2 minutes', now() - interval '2 minutes'),
              ('k-in-flight', 'charge-card', 'e-3', 'pending', 1, now(), now())`,
    );
    const s = await status();
    assert.deepEqual(kinds(s), ['effects-failed', 'effects-outcome-unknown']);
    assert.deepEqual(s.failures.effects, { failed: 1, stalePending: 1, sampleEffects: ['charge-card', 'send-sms'] });
    assert.equal(s.stalled, false, 'a warning: the rest of the pipeline flows');
    await retryFailedEffect(db.pool, { schema: db.schema, event: { eventId: 'e-1' }, effect: 'send-sms' });
    await sql(`DELETE FROM $schema.effects WHERE status = 'pending'`);
    assert.deepEqual(kinds(await status()), []);
  });

  it('rejects an unsafe source table name before any query', async () => {
    await assert.rejects(
      status({ sources: [{ table: 'orders; DROP TABLE x', aggregateType: 'order' }] }),
      /sources\.0\.table/,
    );
  });
});
