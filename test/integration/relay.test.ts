import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import pg from 'pg';
import {
  Relay,
  silentLogger,
  startRelay,
  type EventEnvelope,
  type NewEvent,
  type RelayOptions,
} from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { HEADER, parseEnvelope } from '../../src/internal/index.js';
import { CONTENT_TYPE } from '../../src/transport/wire.js';
import { relaySql } from '../../src/relay/sql.js';
import { schemaRef } from '../../src/runtime/identifier.js';
import { describe, it, uniqueName, waitFor, settle, connectPostgres } from '../support/rig.js';

import { event, reach, withRig, type OutboxRow } from '../support/relay-rig.js';

describe('relay', () => {
  it('publishes committed events with the envelope as body and mirrored AMQP properties', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('order.#');
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const occurredAt = '2024-05-06T07:08:09.123Z';
      const events: NewEvent[] = [
        event('o-1', 1, { eventType: 'OrderPlaced', occurredAt, tenantId: 'tenant-7', traceparent, schemaVersion: 3 }),
        event('o-1', 2, { eventType: 'OrderPaid', occurredAt }),
        event('o-2', 1, { eventType: 'OrderPlaced', occurredAt, kind: 'snapshot' }),
      ];
      const ids = await rig.append(...events);
      const published: string[] = [];
      const relay = rig.started();
      relay.on('published', (eventIds) => published.push(...eventIds));

      const rows = await waitFor(async () => {
        const current = await rig.rows();
        return current.every((row) => row.status === 'published') && current;
      }, 'all rows published');
      for (const row of rows) {
        assert.equal(row.claimed_by, null);
        assert.equal(row.claim_expires_at, null);
        assert.ok(row.published_at instanceof Date, 'published_at set');
        assert.equal(row.attempts, 0);
        assert.equal(row.last_error, null);
      }
      assert.deepEqual([...published].sort(), [...ids].sort());

      const messages: amqp.GetMessage[] = [];
      await waitFor(async () => (messages.push(...(await rig.drain(queue))), messages.length >= 3), 'three messages');
      assert.equal(messages.length, 3);
      const byId = new Map(messages.map((m) => [m.properties.messageId as string, m]));
      assert.deepEqual([...byId.keys()].sort(), [...ids].sort());

      for (const [i, id] of ids.entries()) {
        const input = events[i]!;
        const message = byId.get(id)!;
        const expected: EventEnvelope = {
          eventId: id,
          aggregateType: 'order',
          aggregateId: input.aggregateId as string,
          aggregateVersion: input.aggregateVersion,
          eventType: input.eventType,
          schemaVersion: input.schemaVersion ?? 1,
          kind: input.kind ?? 'incremental',
          payload: input.payload,
          occurredAt,
          ...(input.traceparent ? { traceparent: input.traceparent } : {}),
          ...(input.tenantId ? { tenantId: input.tenantId } : {}),
        };
        assert.deepEqual(parseEnvelope(message.content), expected);
        assert.equal(message.fields.exchange, rig.exchange);
        assert.equal(message.fields.routingKey, `order.${input.eventType}`);
        const p = message.properties;
        assert.equal(p.messageId, id);
        assert.equal(p.type, input.eventType);
        assert.equal(p.deliveryMode, 2);
        assert.equal(p.contentType, CONTENT_TYPE);
        assert.equal(p.timestamp, Math.floor(Date.parse(occurredAt) / 1000));
        // The partition key travels as a property; the only header is the traceparent, when there is one.
        assert.equal(p.correlationId, `order/${input.aggregateId as string}`);
        assert.equal(p.headers?.[HEADER.traceparent], input.traceparent);
        assert.deepEqual(Object.keys(p.headers ?? {}), input.traceparent ? [HEADER.traceparent] : []);
      }
    });
  });

  it('keeps a returned (unroutable) event unpublished with backoff, then publishes it with the same eventId', async () => {
    await withRig(async (rig) => {
      const relay = rig.relay({ backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 } });
      const retries: Array<{ eventId: string; attempts: number; reason: string }> = [];
      relay.on('retry', (info) => retries.push(info));
      const [id] = await rig.append(event('o-1', 1));

      // The exchange exists (the relay declares it) but no queue is bound: acked and returned.
      const first = await relay.runOnce();
      assert.deepEqual(first, { claimed: 1, published: 0, retried: 1, failed: 0, fenced: 0, unblocked: false });
      assert.deepEqual(retries, [{ eventId: id!, attempts: 1, brokerRetries: 0, reason: 'returned' }]);
      const { rows } = await rig.db.pool.query<OutboxRow & { delay_s: number }>(
        `SELECT *, extract(epoch FROM next_attempt_at - now())::float8 AS delay_s FROM ${rig.outbox} WHERE event_id = $1`,
        [id],
      );
      const row = rows[0]!;
      assert.equal(row.status, 'pending');
      assert.equal(row.attempts, 1);
      assert.equal(row.last_error, 'CONVERGE_PUBLISH_RETURNED');
      assert.equal(row.published_at, null);
      assert.equal(row.claimed_by, null);
      assert.ok(row.delay_s > 25 && row.delay_s <= 60, `next attempt ~30-60 s ahead, got ${row.delay_s}`);

      // Not due yet: nothing is claimed.
      assert.equal((await relay.runOnce()).claimed, 0);

      const queue = await rig.queue('#');
      await rig.db.pool.query(`UPDATE ${rig.outbox} SET next_attempt_at = now() WHERE event_id = $1`, [id]);
      const second = await relay.runOnce();
      assert.deepEqual(second, { claimed: 1, published: 1, retried: 0, failed: 0, fenced: 0, unblocked: false });

      const after = await rig.row(id!);
      assert.equal(after.status, 'published');
      assert.equal(after.attempts, 1);
      assert.equal(after.last_error, null);
      assert.equal(after.claimed_by, null);
      assert.ok(after.published_at instanceof Date);

      const messages = await rig.drain(queue);
      assert.equal(messages.length, 1);
      assert.equal(messages[0]!.properties.messageId, id);
      assert.equal(parseEnvelope(messages[0]!.content).eventId, id);
    });
  });

  it('marks an event failed after maxAttempts, keeps it, and keeps holding back its aggregate', async () => {
    await withRig(async (rig) => {
      const [id, laterId] = await rig.append(event('o-1', 1), event('o-1', 2));
      const retries: Array<{ eventId: string; attempts: number; reason: string }> = [];
      const failures: Array<{ eventId: string; attempts: number; reason: string }> = [];
      const relay = rig.started({ maxAttempts: 2, backoff: { initialDelayMs: 1, maxDelayMs: 2 }, pollIntervalMs: 5 });
      relay.on('retry', (info) => retries.push(info));
      relay.on('failed', (info) => failures.push(info));

      await waitFor(() => failures.length > 0, "the relay's 'failed' event");
      await relay.stop();
      assert.deepEqual(failures, [{ eventId: id!, attempts: 2, brokerRetries: 0, reason: 'returned' }]);
      assert.deepEqual(retries, [{ eventId: id!, attempts: 1, brokerRetries: 0, reason: 'returned' }]);

      const rows = await rig.rows();
      assert.equal(rows.length, 2, 'nothing is deleted');
      const [failed, later] = rows;
      assert.equal(failed!.event_id, id);
      assert.equal(failed!.status, 'failed');
      assert.equal(failed!.attempts, 2);
      assert.equal(failed!.last_error, 'CONVERGE_PUBLISH_RETURNED');
      assert.equal(failed!.claimed_by, null);
      assert.equal(failed!.published_at, null);
      assert.equal(later!.event_id, laterId);
      assert.equal(later!.status, 'pending');
      assert.equal(later!.attempts, 0);
      assert.equal(later!.claimed_by, null);

      // A failed row is never claimed again, and it holds back later versions of its aggregate.
      await rig.db.pool.query(`UPDATE ${rig.outbox} SET next_attempt_at = now() - interval '1 minute'`);
      const other = rig.relay();
      assert.equal((await other.runOnce()).claimed, 0);
      assert.equal((await rig.row(id!)).attempts, 2);
    });
  });

  it('re-publishes after a crash between confirm and mark once the lease expires (duplicate, same messageId)', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const relayB = rig.relay({ relayId: uniqueName('relay_b') });
      assert.equal((await relayB.runOnce()).claimed, 0, 'warm-up on an empty outbox');
      const relayA = rig.relay({
        relayId: uniqueName('relay_a'),
        leaseMs: 500,
        hooks: {
          afterConfirm: () => {
            throw new Error('simulated crash after confirm');
          },
        },
      });
      const [id] = await rig.append(event('o-1', 1));

      await assert.rejects(relayA.runOnce(), /simulated crash after confirm/);
      const claimed = await rig.row(id!);
      assert.equal(claimed.status, 'pending');
      assert.equal(claimed.claimed_by, relayA.options.relayId);
      assert.equal(claimed.attempts, 0);
      assert.equal(claimed.published_at, null);

      // The lease still protects A's claim.
      assert.equal((await relayB.runOnce()).claimed, 0);
      const stillA = await rig.row(id!);
      assert.equal(stillA.claimed_by, relayA.options.relayId);

      await waitFor(async () => {
        const { rows } = await rig.db.pool.query(
          `SELECT 1 FROM ${rig.outbox} WHERE event_id = $1 AND claim_expires_at < now()`,
          [id],
        );
        return rows.length === 1;
      }, "A's lease to expire");
      assert.deepEqual(await relayB.runOnce(), {
        claimed: 1,
        published: 1,
        retried: 0,
        failed: 0,
        fenced: 0,
        unblocked: false,
      });
      const published = await rig.row(id!);
      assert.equal(published.status, 'published');
      assert.equal(published.claimed_by, null);

      const messages = await rig.drain(queue);
      assert.equal(messages.length, 2, 'published once by A (confirmed, never marked) and once by B');
      assert.deepEqual(
        messages.map((m): unknown => m.properties.messageId),
        [id, id],
      );
    });
  });

  it('fences marks by claimed_by: a relay that lost its lease cannot mark the row another relay holds', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const holdA = rig.gate();
      const holdB = rig.gate();
      const relayA = rig.relay({
        relayId: uniqueName('relay_a'),
        leaseMs: 300,
        hooks: { afterConfirm: async () => (holdA.entered(), holdA.released) },
      });
      const relayB = rig.relay({
        relayId: uniqueName('relay_b'),
        leaseMs: 30_000,
        hooks: { afterConfirm: async () => (holdB.entered(), holdB.released) },
      });
      const [id] = await rig.append(event('o-1', 1));

      const cycleA = relayA.runOnce();
      await reach(holdA, cycleA, 'relay A');
      assert.equal((await rig.row(id!)).claimed_by, relayA.options.relayId);
      await waitFor(async () => {
        const { rows } = await rig.db.pool.query(
          `SELECT 1 FROM ${rig.outbox} WHERE event_id = $1 AND claim_expires_at < now()`,
          [id],
        );
        return rows.length === 1;
      }, "A's lease to expire");

      const cycleB = relayB.runOnce();
      await reach(holdB, cycleB, 'relay B re-claiming after the lease expired');
      assert.equal((await rig.row(id!)).claimed_by, relayB.options.relayId);

      // A wakes up after B took the claim over: its confirmed publish is not marked.
      holdA.release();
      assert.deepEqual(await cycleA, { claimed: 1, published: 0, retried: 0, failed: 0, fenced: 1, unblocked: false });
      const heldByB = await rig.row(id!);
      assert.equal(heldByB.status, 'pending');
      assert.equal(heldByB.claimed_by, relayB.options.relayId);
      assert.equal(heldByB.published_at, null);

      // While B's lease is valid A claims nothing.
      assert.equal((await relayA.runOnce()).claimed, 0);

      // SQL-level: the relay's own fenced statements, run as A, change nothing.
      const sql = relaySql(schemaRef(rig.schema));
      const mark = await rig.db.pool.query(sql.markPublished, [relayA.options.relayId, [heldByB.position]]);
      assert.equal(mark.rowCount, 0);
      const reschedule = await rig.db.pool.query(sql.reschedule, [
        relayA.options.relayId,
        [heldByB.position],
        ['CONVERGE_PUBLISH_RETURNED'],
        [1000],
        10,
        [false],
        [true],
      ]);
      assert.equal(reschedule.rowCount, 0);
      const untouched = await rig.row(id!);
      assert.equal(untouched.status, 'pending');
      assert.equal(untouched.attempts, 0);
      assert.equal(untouched.claimed_by, relayB.options.relayId);

      holdB.release();
      assert.deepEqual(await cycleB, { claimed: 1, published: 1, retried: 0, failed: 0, fenced: 0, unblocked: false });
      assert.equal((await rig.row(id!)).status, 'published');
      const messages = await rig.drain(queue);
      assert.deepEqual(
        messages.map((m): unknown => m.properties.messageId),
        [id, id],
      );
    });
  });

  it('re-takes expired claims left by a dead relay and leaves live claims alone', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const [dead1, dead2, live, free] = await rig.append(event('a', 1), event('b', 1), event('c', 1), event('d', 1));
      await rig.db.pool.query(
        `UPDATE ${rig.outbox} SET claimed_by = 'dead-relay', claim_expires_at = now() - interval '1 second' WHERE event_id = ANY($1)`,
        [[dead1, dead2]],
      );
      await rig.db.pool.query(
        `UPDATE ${rig.outbox} SET claimed_by = 'live-relay', claim_expires_at = now() + interval '1 minute' WHERE event_id = $1`,
        [live],
      );

      const relay = rig.relay();
      assert.deepEqual(await relay.runOnce(), {
        claimed: 3,
        published: 3,
        retried: 0,
        failed: 0,
        fenced: 0,
        unblocked: false,
      });
      for (const id of [dead1, dead2, free]) {
        const row = await rig.row(id!);
        assert.equal(row.status, 'published', id);
        assert.equal(row.claimed_by, null);
      }
      const liveRow = await rig.row(live!);
      assert.equal(liveRow.status, 'pending');
      assert.equal(liveRow.claimed_by, 'live-relay');

      const ids = (await rig.drain(queue)).map((m) => m.properties.messageId as string);
      assert.deepEqual(ids.sort(), [dead1, dead2, free].sort());
    });
  });

  it('holds back later versions of an aggregate while its earlier event retries, without blocking others', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('order.#');
      let blockA1 = true;
      const relay = rig.relay({
        backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 },
        routingKey: (e) =>
          blockA1 && e.aggregateId === 'A' && e.aggregateVersion === 1 ? 'nowhere.A1' : `order.${e.eventType}`,
      });
      const [a1, a2, a3] = await rig.append(event('A', 1), event('A', 2), event('A', 3));
      const [b1, b2] = await rig.append(event('B', 1), event('B', 2));

      assert.deepEqual(
        await relay.runOnce(),
        { claimed: 2, published: 1, retried: 1, failed: 0, fenced: 0, unblocked: true },
        'A1 returned, B1 published',
      );
      assert.deepEqual(
        await relay.runOnce(),
        { claimed: 1, published: 1, retried: 0, failed: 0, fenced: 0, unblocked: false },
        'B2 published',
      );
      assert.equal((await relay.runOnce()).claimed, 0, 'A2, A3 are not eligible while A1 waits');

      // Even when A1 is due again and still unroutable, A2/A3 are never claimed.
      await rig.db.pool.query(`UPDATE ${rig.outbox} SET next_attempt_at = now() WHERE event_id = $1`, [a1]);
      assert.deepEqual(await relay.runOnce(), {
        claimed: 1,
        published: 0,
        retried: 1,
        failed: 0,
        fenced: 0,
        unblocked: false,
      });

      const whileRetrying = new Map((await rig.rows()).map((row) => [row.event_id, row]));
      assert.equal(whileRetrying.get(a1!)!.status, 'pending');
      assert.equal(whileRetrying.get(a1!)!.attempts, 2);
      for (const id of [a2, a3]) {
        const row = whileRetrying.get(id!)!;
        assert.equal(row.status, 'pending');
        assert.equal(row.attempts, 0);
        assert.equal(row.claimed_by, null);
        assert.equal(row.claim_expires_at, null);
      }
      for (const id of [b1, b2]) assert.equal(whileRetrying.get(id!)!.status, 'published');
      const early = await rig.drain(queue);
      assert.deepEqual(
        early.map((m): unknown => m.properties.messageId),
        [b1, b2],
      );

      blockA1 = false;
      await rig.db.pool.query(`UPDATE ${rig.outbox} SET next_attempt_at = now() WHERE event_id = $1`, [a1]);
      const cycles: number[] = [];
      for (;;) {
        const { claimed, published } = await relay.runOnce();
        if (claimed === 0) break;
        assert.equal(published, claimed);
        cycles.push(claimed);
        assert.ok(cycles.length <= 3, 'A1, A2, A3 take one cycle each');
      }
      assert.deepEqual(cycles, [1, 1, 1]);
      assert.ok((await rig.rows()).every((row) => row.status === 'published'));

      const late = await rig.drain(queue);
      const versions = late.map((m) => parseEnvelope(m.content)).filter((e) => e.aggregateId === 'A');
      assert.deepEqual(
        versions.map((e) => e.aggregateVersion),
        [1, 2, 3],
      );
      assert.deepEqual(
        versions.map((e) => e.eventId),
        [a1, a2, a3],
      );
    });
  });

  it('stops gracefully: finishes the cycle in flight and installs signal handlers only when asked', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const sigterm = process.listenerCount('SIGTERM');
      const sigint = process.listenerCount('SIGINT');

      const hold = rig.gate();
      let held = false;
      const relay = rig.started({
        handleSignals: false,
        hooks: {
          afterConfirm: async () => {
            if (held) return;
            held = true;
            hold.entered();
            await hold.released;
          },
        },
      });
      assert.equal(process.listenerCount('SIGTERM'), sigterm);
      assert.equal(process.listenerCount('SIGINT'), sigint);

      const [id] = await rig.append(event('o-1', 1));
      await waitFor(() => held, 'the relay to confirm the event and reach afterConfirm');
      let stopped = false;
      const stopping = relay.stop().then(() => (stopped = true));
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(stopped, false, 'stop() waits for the confirmed batch to be marked');
      hold.release();
      await stopping;
      const row = await rig.row(id!);
      assert.equal(row.status, 'published', 'the in-flight confirmed event was marked before stop() resolved');
      assert.equal(row.claimed_by, null);
      assert.equal((await rig.drain(queue)).length, 1);
      assert.equal(process.listenerCount('SIGTERM'), sigterm);
      assert.equal(process.listenerCount('SIGINT'), sigint);

      const withSignals = rig.started({ handleSignals: true });
      assert.equal(process.listenerCount('SIGTERM'), sigterm + 1);
      assert.equal(process.listenerCount('SIGINT'), sigint + 1);
      await withSignals.stop();
      assert.equal(process.listenerCount('SIGTERM'), sigterm);
      assert.equal(process.listenerCount('SIGINT'), sigint);
    });
  });

  it('stop() does not wait out the poll interval when called during a cycle that claims nothing', async () => {
    await withRig(async (rig) => {
      const pool = await connectPostgres(2);
      pool.on('error', () => undefined);
      rig.pools.push(pool);
      type Statement = string | pg.QueryConfig;
      const original = pool.query.bind(pool) as (statement: Statement, values?: unknown[]) => Promise<pg.QueryResult>;
      const hold = rig.gate();
      let holding = true;
      // Holds the relay's first claim query so stop() lands while that (empty) cycle is in flight.
      pool.query = (async (statement: Statement, values?: unknown[]) => {
        const text = typeof statement === 'string' ? statement : statement.text;
        if (holding && text.includes('candidates')) {
          holding = false;
          hold.entered();
          await hold.released;
        }
        return original(statement, values);
      }) as unknown as typeof pool.query;

      // An hour between polls: stop() can only return (within the test timeout) if it does not wait it out.
      const pollIntervalMs = 3_600_000;
      const relay = rig.started({ pool, pollIntervalMs });
      await waitFor(() => !holding, "the relay's first claim query");
      const stopping = settle(relay.stop());
      hold.release();
      assert.deepEqual(
        await stopping,
        { ok: true, value: undefined },
        `stop() returned without waiting out pollIntervalMs ${pollIntervalMs}`,
      );
    });
  });

  it('claims the next version of a hot aggregate as soon as the previous one is marked, without a poll or NOTIFY', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      await rig.append(event('hot', 1), event('hot', 2), event('hot', 3), event('cold', 1));
      // No listener and a poll interval far beyond the wait: only the mark's `unblocks` can re-run the claim.
      // Each batch's mark is held until the loop has gone idle, so nothing else can wake it.
      let idles = 0;
      let batches = 0;
      const relay = rig.started({
        pollIntervalMs: 120_000,
        listen: false,
        concurrency: 2,
        hooks: {
          // The k-th batch is followed by a claim that finds nothing (the k-th idle) before it may be marked.
          afterConfirm: async () => {
            const batch = ++batches;
            await waitFor(async () => idles >= batch, 'the relay loop to go idle');
          },
        },
      });
      relay.on('idle', () => idles++);
      await waitFor(
        async () => (await rig.rows()).every((row) => row.status === 'published'),
        'hot v1..v3 published one after the other',
        10_000,
      );
      const versions = (await rig.drain(queue))
        .map((m) => parseEnvelope(m.content))
        .filter((e) => e.aggregateId === 'hot')
        .map((e) => e.aggregateVersion);
      assert.deepEqual(versions, [1, 2, 3]);
    });
  });

  it('publishes every event exactly in aggregate order with several concurrent cycles', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const events = Array.from({ length: 200 }, (_, i) => event(`c-${i % 10}`, Math.floor(i / 10) + 1));
      await rig.append(...events);
      rig.started({ concurrency: 4, batchSize: 7 });
      await waitFor(
        async () => (await rig.rows()).every((row) => row.status === 'published'),
        'all 200 events published',
      );
      // Confirmed publishes are already enqueued, so one drain sees them all.
      const messages = await rig.drain(queue);
      assert.equal(messages.length, 200);
      const lastVersion = new Map<string, number>();
      for (const message of messages) {
        const envelope = parseEnvelope(message.content);
        assert.equal(
          envelope.aggregateVersion,
          (lastVersion.get(envelope.aggregateId) ?? 0) + 1,
          `versions of ${envelope.aggregateId} arrive in order`,
        );
        lastVersion.set(envelope.aggregateId, envelope.aggregateVersion);
      }
    });
  });

  it('rejects invalid configuration with ConfigError naming the option', () => {
    const cases: Array<[RelayOptions, string]> = [
      [{ batchSize: 0 }, 'batchSize'],
      [{ schema: 'Bad-Name' }, 'schema'],
      [{ routingKey: '{aggregateType}.{nope}' }, 'routingKey'],
      [{ leaseMs: 10 }, 'leaseMs'],
      [{ backoff: { factor: 0.5 } }, 'backoff.factor'],
    ];
    for (const [options, field] of cases) {
      assert.throws(
        () => startRelay({ logger: silentLogger, ...options }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, `${field}: ${String(err)}`);
          assert.equal(err.field, field);
          assert.equal(err.code, 'CONVERGE_INVALID_CONFIG');
          return true;
        },
      );
    }
    assert.throws(() => new Relay({ logger: silentLogger, routingKey: '{tenant}.{eventType}' }), ConfigError);
  });
});
