/**
 * Conflicts and quarantine: same eventId with other content, invalid envelopes, unknown event
 * types and schema versions, repeated quarantines and stale versions.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import { ContentConflictError } from '../../src/errors.js';
import { fingerprint } from '../../src/internal/index.js';
import {
  withEnv,
  envelope,
  applyOrder,
  collect,
  quarantineRows,
  capturingLogger,
  SECRET,
} from '../support/consumer-env.js';
import { describe, test, waitFor } from '../support/rig.js';

describe('consumer conflicts and quarantine', () => {
  test('same eventId with other content: conflict event, quarantine row with the raw delivery, nothing applied', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        consumer: 'orders-view',
        handlers: { AmountAdded: async (event, ctx) => void (calls++, await apply(event, ctx)) },
      });
      const conflicts: ContentConflictError[] = [];
      consumer.on('conflict', (err) => conflicts.push(err));
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const original = envelope('E1', 'o1', 1, { delta: 10 });
        await env.publish(original);
        await waitFor(() => consumer.stats.applied === 1, 'the original to apply');

        const impostor = envelope('E1', 'o1', 1, { delta: 99 });
        const before = new Date();
        const sent = await env.publish(impostor);
        await waitFor(() => conflicts.length === 1, 'the conflict event');

        const err = conflicts[0]!;
        assert.ok(err instanceof ContentConflictError);
        assert.equal(err.code, 'CONVERGE_CONTENT_CONFLICT');
        assert.equal(err.eventId, 'E1');
        assert.equal(err.consumer, 'orders-view');
        assert.equal(err.storedFingerprint, fingerprint(original));
        assert.equal(err.receivedFingerprint, fingerprint(impostor));
        assert.ok(!err.message.includes('99'), 'the message names ids, not payload values');

        const last = settled.at(-1)!;
        assert.ok(last.action === 'ack' && last.outcome === 'quarantined' && last.reason === 'content-conflict');
        assert.equal(consumer.stats.quarantined, 1);

        const rows = await quarantineRows(env);
        assert.equal(rows.length, 1);
        const row = rows[0]!;
        assert.equal(row.consumer, 'orders-view');
        assert.equal(row.event_id, 'E1');
        assert.equal(row.reason, 'content-conflict');
        assert.equal(row.fingerprint, fingerprint(impostor));
        assert.equal(row.exchange, env.exchange);
        assert.equal(row.routing_key, 'order.AmountAdded');
        assert.ok(Buffer.isBuffer(row.body) && row.body.equals(sent), 'the raw body is kept byte for byte');
        assert.equal(row.properties.messageId, 'E1');
        assert.equal(row.properties.type, 'AmountAdded');
        assert.equal(row.properties.correlationId, 'order/o1', 'the partition key, kept as sent');
        assert.deepEqual(row.properties.headers ?? {}, {}, 'an untraced event travels without headers');
        assert.ok(row.quarantined_at instanceof Date && row.quarantined_at.getTime() >= before.getTime() - 5000);
        assert.equal(row.resolved_at, null);

        assert.equal(calls, 1, 'the handler never saw the conflicting copy');
        assert.equal(
          await env.count(`SELECT sum(amount) AS n FROM $schema.applied`),
          10,
          'nothing of the impostor applied',
        );
        const { rows: inbox } = await env.pool.query(
          `SELECT fingerprint FROM "${env.schema}".inbox WHERE consumer = 'orders-view'`,
        );
        assert.deepEqual(inbox, [{ fingerprint: fingerprint(original) }], 'the inbox keeps the original fingerprint');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'the conflicting delivery was acked');
    });
  });

  test('invalid envelopes are quarantined without leaking the payload into detail or logs, and acked', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const logger = capturingLogger();
      const consumer = env.start({
        logger,
        maxEnvelopeBytes: 2048,
        handlers: { AmountAdded: async () => void calls++ },
      });
      try {
        await consumer.ready();
        const bodies = new Map<string, Buffer>();
        const send = async (label: string, content: Buffer) =>
          bodies.set(
            label,
            await env.publishRaw('order.AmountAdded', content, {
              messageId: `M-${label}`,
              headers: { 'x-test-case': label },
            }),
          );

        const { aggregateId: _dropped, ...missing } = envelope('E-missing', 'o1', 1, { card: SECRET });
        await send('missing-field', Buffer.from(JSON.stringify(missing)));
        await send('not-json', Buffer.from(`{"eventId":"E-broken","payload":{"card":"${SECRET}"`));
        await send(
          'too-large',
          Buffer.from(JSON.stringify(envelope('E-large', 'o1', 1, { card: SECRET, filler: 'x'.repeat(4000) }))),
        );
        await send(
          'wrong-type',
          Buffer.from(JSON.stringify({ ...envelope('E-type', 'o1', 1, { card: SECRET }), aggregateVersion: SECRET })),
        );

        await waitFor(() => consumer.stats.quarantined === 4, 'four quarantined deliveries');
        const rows = await quarantineRows(env);
        assert.equal(rows.length, 4);
        const byCase = new Map(rows.map((r) => [String(r.properties.headers?.['x-test-case']), r]));
        const expectations: [string, string, RegExp][] = [
          ['missing-field', 'invalid-envelope', /"aggregateId"/],
          ['not-json', 'malformed-body', /"\(body\)".*not valid JSON/],
          ['too-large', 'body-too-large', /"\(body\)".*exceeds limit of 2048/],
          ['wrong-type', 'invalid-envelope', /"aggregateVersion".*expected number/],
        ];
        for (const [label, reason, detail] of expectations) {
          const row = byCase.get(label);
          assert.ok(row, `a quarantine row for ${label}`);
          assert.equal(row.reason, reason, label);
          assert.match(row.detail, detail, label);
          assert.ok(!row.detail.includes(SECRET), `${label}: detail must not quote the payload (${row.detail})`);
          assert.equal(row.event_id, null, `${label}: no trusted eventId`);
          assert.equal(row.fingerprint, null, label);
          assert.equal(row.properties.messageId, `M-${label}`);
          assert.ok(row.body.equals(bodies.get(label)!), `${label}: raw body kept for a person`);
        }
        assert.equal(calls, 0, 'no handler ran');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0);
        assert.ok(logger.records.length >= 4, 'the quarantines were logged');
        for (const record of logger.records)
          assert.ok(!record.includes(SECRET), `log line leaks the payload: ${record}`);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'quarantined deliveries are acked');
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0, 'and never parked for retry');
    });
  });

  test("unknown event types: quarantined by default, acked without trace with 'ignore', caught by '*'", async () => {
    await withEnv(async (env) => {
      let known = 0;
      const handlers = { AmountAdded: async () => void known++ };

      const strict = env.start({ handlers });
      await strict.ready();
      await env.publish(envelope('U1', 'o1', 1, {}, 'OrderShipped'));
      await waitFor(() => strict.stats.quarantined === 1, 'the unknown type to be quarantined');
      await env.stop(strict);
      const [row, ...more] = await quarantineRows(env);
      assert.equal(more.length, 0);
      assert.equal(row!.reason, 'unknown-event-type');
      assert.equal(row!.event_id, 'U1');
      assert.match(row!.detail, /no handler for eventType OrderShipped/);
      assert.equal(row!.consumer, env.queue, 'the consumer name defaults to the queue');
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked after quarantine');

      const lenient = env.start({ handlers, unknownEventType: 'ignore' });
      const settled = collect(lenient);
      await lenient.ready();
      await env.publish(envelope('U2', 'o1', 1, {}, 'OrderShipped'));
      await waitFor(() => lenient.stats.ignored === 1, 'the unknown type to be ignored');
      await env.stop(lenient);
      assert.deepEqual(settled, [{ action: 'ack', outcome: 'ignored', eventId: 'U2' }]);
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'ignored deliveries are acked');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'no inbox row for an ignored event');
      assert.equal((await quarantineRows(env)).length, 1, 'no new quarantine row');

      const seen: string[] = [];
      const catchAll = env.start({ handlers: { ...handlers, '*': async (event) => void seen.push(event.eventType) } });
      await catchAll.ready();
      await env.publish(envelope('U3', 'o1', 1, {}, 'OrderShipped'));
      await env.publish(envelope('K1', 'o1', 1, { delta: 1 }));
      await waitFor(() => catchAll.stats.applied === 2, "both to apply, one through '*'");
      await env.stop(catchAll);
      assert.deepEqual(seen, ['OrderShipped']);
      assert.equal(known, 1, 'a type with its own handler does not go to *');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id IN ('U3', 'K1')`), 2);
    });
  });

  test('upcasters give handlers the current shape; a newer schema version is quarantined, and duplicates compare what was sent', async () => {
    await withEnv(async (env) => {
      const seen: unknown[] = [];
      const consumer = env.start({
        schemas: {
          AmountAdded: { current: 2, upcasters: { 1: (p) => ({ deltaCents: (p as { delta: number }).delta * 100 }) } },
        },
        handlers: { AmountAdded: async (event) => void seen.push([event.eventId, event.schemaVersion, event.payload]) },
      });
      try {
        await consumer.ready();
        await env.publish(envelope('V1', 'o1', 1, { delta: 3 }));
        await env.publish(envelope('V1', 'o1', 1, { delta: 3 }));
        await env.publish({ ...envelope('V2', 'o2', 1, { deltaCents: 700 }), schemaVersion: 2 });
        await env.publish({ ...envelope('V3', 'o3', 1, { cents: 1 }), schemaVersion: 3 });
        await waitFor(
          () => consumer.stats.applied === 2 && consumer.stats.duplicate === 1 && consumer.stats.quarantined === 1,
          'two applied, one duplicate, one quarantined',
        );
        assert.deepEqual(seen, [
          ['V1', 2, { deltaCents: 300 }],
          ['V2', 2, { deltaCents: 700 }],
        ]);
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'unsupported-schema-version');
        assert.equal(
          (JSON.parse(row!.body.toString()) as { schemaVersion: number }).schemaVersion,
          3,
          'the raw body keeps its original version for a replay after an upgrade',
        );
        const stored = await env.pool.query<{ fingerprint: string }>(
          `SELECT fingerprint FROM "${env.schema}".inbox WHERE event_id = 'V1'`,
        );
        assert.equal(
          stored.rows[0]!.fingerprint,
          fingerprint(envelope('V1', 'o1', 1, { delta: 3 })),
          'fingerprint of the event as sent',
        );
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('the same message quarantined again while its row is open updates that row: times seen and last seen', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await env.publish(envelope('E1', 'o1', 1, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the first conflicting copy quarantined');
        await env.publish(envelope('E1', 'o1', 1, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 2, 'the second identical conflicting copy quarantined');
        await env.publish(envelope('E1', 'o1', 1, { delta: 77 }));
        await waitFor(() => consumer.stats.quarantined === 3, 'a third, different content');
        const rows = await quarantineRows(env);
        assert.deepEqual(
          rows.map((r) => [r.reason, r.failure_class, r.times_seen]),
          [
            ['content-conflict', 'permanent', 2],
            ['content-conflict', 'permanent', 1],
          ],
        );
        assert.ok(rows[0]!.last_seen_at.getTime() >= rows[0]!.quarantined_at.getTime());
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a different event claiming an applied version is quarantined as stale-version', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await env.publish(envelope('E1-other', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the stale event to be quarantined');
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'stale-version');
        assert.equal(row!.event_id, 'E1-other');
        assert.equal(consumer.stats.retried, 0, 'waiting cannot help, so no retry');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1-other'`), 0);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 10);
      } finally {
        await env.stop(consumer);
      }
    });
  });
});
