// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
import assert from 'node:assert/strict';
import { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY } from '../../src/transport/wire.js';
import { outboxRowToEnvelope, type OutboxEnvelopeRow } from '../../src/relay/index.js';
import { withTransaction, appendToOutbox, createCdcSlot, CdcRelay, migrate } from '../../src/index.js';
import { SchemaNotMigratedError, WalLevelNotLogicalError } from '../../src/errors.js';
import { parseLsn } from '../../src/relay/cdc/lsn.js';
import client from 'prom-client';
import { createInProcessTransport } from '../../src/index.js';
import { serveRelayMetrics } from '../../src/metrics/index.js';
import { AMQP_URL, DATABASE_URL, test, uniqueName, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig, withNonLogicalSchema, type CdcRig } from '../support/cdc-fixture.js';
import { databaseAddress, literal } from '../support/database-url.js';

/** Per aggregate, the versions in the order of their first arrival. */
function firstArrivalOrder(rig: CdcRig): Map<string, number[]> {
  const seen = new Set<string>();
  const order = new Map<string, number[]>();
  for (const { envelope } of rig.received) {
    if (seen.has(envelope.eventId)) continue;
    seen.add(envelope.eventId);
    const key = `${envelope.aggregateType}/${envelope.aggregateId}`;
    order.set(key, [...(order.get(key) ?? []), envelope.aggregateVersion]);
  }
  return order;
}

async function allPublished(rig: CdcRig): Promise<boolean> {
  const rows = await rig.rows();
  return rows.length > 0 && rows.every((row) => row.status === 'published');
}

test('events committed in several transactions arrive once each, in commit order per aggregate, and are marked', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started();
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    const acknowledged: string[] = [];
    relay.on('acknowledged', (lsn) => acknowledged.push(lsn));
    await rig.append(orderEvent('a', 1), orderEvent('b', 1));
    await rig.append(orderEvent('a', 2));
    await assert.rejects(
      withTransaction(rig.pool, async (client) => {
        await appendToOutbox(client, orderEvent('c', 1), { schema: rig.schema });
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    await rig.append(orderEvent('b', 2), orderEvent('a', 3));
    await waitFor(() => allPublished(rig), 'every outbox row marked published');
    await waitFor(() => rig.received.length >= 5 && true, 'five messages');
    const rows = await rig.rows();
    assert.equal(rows.length, 5, 'the rolled-back event never reached the outbox');
    assert.deepEqual(rig.arrivals().sort(), rows.map((row) => row.event_id).sort(), 'each event exactly once');
    assert.deepEqual(
      Object.fromEntries(firstArrivalOrder(rig)),
      { 'order/a': [1, 2, 3], 'order/b': [1, 2] },
      'commit order per aggregate',
    );
    // The wire format is the polling relay's, byte for byte.
    const { rows: full } = await rig.pool.query<OutboxEnvelopeRow>(`SELECT * FROM "${rig.schema}".outbox`);
    const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
    for (const row of full) {
      const expected = encodeMessage(outboxRowToEnvelope(row), routingKey);
      const got = rig.received.find((r) => r.envelope.eventId === row.event_id)!;
      assert.equal(got.content.toString(), expected.content.toString());
      assert.equal(got.routingKey, expected.routingKey);
      assert.equal(got.properties.messageId, row.event_id);
      assert.equal(got.properties.correlationId, expected.options.correlationId, 'the partition key');
      // No header table unless the event has a traceparent; the broker then delivers an empty one.
      assert.deepEqual(got.properties.headers ?? {}, expected.options.headers ?? {});
    }
    // The slot follows: acknowledged past the last commit once everything is confirmed and marked.
    await waitFor(() => acknowledged.length > 0, 'an acknowledgement');
    const { rows: walNow } = await rig.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    await waitFor(async () => {
      const slot = await rig.slotInfo();
      return slot?.confirmedFlushLsn && parseLsn(slot.confirmedFlushLsn) >= parseLsn(acknowledged.at(-1)!);
    }, 'the slot to confirm the last acknowledged commit');
    assert.ok(parseLsn(acknowledged.at(-1)!) <= parseLsn(walNow[0]!.lsn));
  });
});

test('an unroutable event stops the stream there; once routable, everything arrives in order and nothing is skipped', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started();
    const retries: { eventId: string; attempts: number; reason: string }[] = [];
    relay.on('retry', (info) => retries.push(info));
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    const [a1] = await rig.append(orderEvent('a', 1));
    await waitFor(async () => (await rig.rows()).every((r) => r.status === 'published'), 'a1 marked');
    await waitFor(() => rig.received.length === 1 && true, 'a1 received');
    const before = await rig.appendBefore(orderEvent('i', 1, { aggregateType: 'invoice' }));
    await rig.append(orderEvent('a', 2), orderEvent('b', 1));
    await rig.append(orderEvent('a', 3));
    await waitFor(() => retries.length >= 3, 'the stream to stop and retry the unroutable event three times');
    assert.ok(retries.every((r) => r.reason === 'returned'));
    assert.equal(new Set(retries.map((r) => r.eventId)).size, 1, 'always the same event, never one after it');
    const slot = await rig.slotInfo();
    assert.ok(
      slot?.confirmedFlushLsn && parseLsn(slot.confirmedFlushLsn) <= parseLsn(before),
      `the slot stays before the unroutable event (${slot?.confirmedFlushLsn} <= ${before})`,
    );
    const stuck = (await rig.rows()).find((r) => r.aggregate_id === 'i')!;
    assert.equal(stuck.status, 'pending', 'never marked failed');
    assert.ok(stuck.attempts >= 3 && stuck.last_error !== null, 'each stop counted on the row');

    await rig.bind('invoice.#');
    await waitFor(() => allPublished(rig), 'every row marked published after binding');
    // A row is marked once the broker confirmed it, which can come before this test's queue delivered it.
    const resent = () => rig.received.slice(rig.received.findIndex((r) => r.envelope.aggregateId === 'i'));
    await waitFor(
      () => rig.received.some((r) => r.envelope.aggregateId === 'i') && resent().length >= 4,
      'the resent events delivered',
    );
    const rows = await rig.rows();
    assert.deepEqual(new Set(rig.arrivals()), new Set(rows.map((r) => r.event_id)), 'nothing skipped');
    assert.equal(rig.arrivals().filter((id) => id === a1).length, 1, 'a1, acknowledged before, is not resent');
    // Per aggregate, each version's last copy arrives in order: the retry resends everything after the stop.
    assert.deepEqual(rig.lastCopyOrder(), { a: [1, 2, 3], b: [1], i: [1] });
    const after = resent().map((r) => `${r.envelope.aggregateId}${r.envelope.aggregateVersion}`);
    assert.deepEqual(after, ['i1', 'a2', 'b1', 'a3'], 'the retried event first, then everything committed after it');
  }, 'order.#');
});

test('a second relay on the same slot waits as standby and takes over when the first stops', async () => {
  await withCdcRig(async (rig) => {
    const first = rig.started({ relayId: 'first' });
    await waitFor(() => first.state === 'active', 'the first relay to hold the slot');
    const second = rig.started({ relayId: 'second' });
    const standby: (number | null)[] = [];
    second.on('standby', (pid) => standby.push(pid));
    await waitFor(() => second.state === 'standby', 'the second relay to wait as standby');
    assert.equal(typeof standby[0], 'number', 'the standby names the walsender holding the slot');
    await rig.append(orderEvent('a', 1));
    await waitFor(() => allPublished(rig), 'a1 published by the first relay');
    assert.equal(second.state, 'standby');
    await first.stop();
    await waitFor(() => second.state === 'active', 'the second relay to take over');
    await rig.append(orderEvent('a', 2));
    await waitFor(async () => (await rig.rows()).length === 2 && allPublished(rig), 'a2 published by the second relay');
    await waitFor(() => rig.received.length >= 2 && true, 'both messages');
    assert.deepEqual(
      rig.received.map((r) => r.envelope.aggregateVersion),
      [1, 2],
      'nothing lost or resent across the takeover (the first one acknowledged before stopping)',
    );
  });
});

test('metrics: the polling names for published and confirm latency, the slot gauges of its own', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started();
    const registry = new client.Registry();
    // The one relay registration, given a CDC relay: its probes and gauges, not the polling relay's.
    const served = serveRelayMetrics(relay, { port: 0, registry });
    try {
      const url = await served.url;
      await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
      assert.equal((await fetch(`${url}/readyz`)).status, 200, 'ready while it streams');
      const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
      assert.ok(!names.includes('converge_relay_broker_blocked'), 'no polling-only instrument');
      await rig.append(orderEvent('a', 1), orderEvent('a', 2));
      await waitFor(() => allPublished(rig), 'both marked');
      const value = async (name: string) => {
        const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
        return metric?.values[0]?.value;
      };
      await waitFor(async () => (await value('converge_relay_published_total')) === 2, 'published_total = 2');
      const confirms = (await registry.getMetricsAsJSON()).find((m) => m.name === 'converge_relay_confirm_seconds');
      assert.equal(
        (confirms?.values as { metricName?: string; value: number }[] | undefined)?.find(
          (v) => v.metricName === 'converge_relay_confirm_seconds_count',
        )?.value,
        2,
      );
      assert.equal(await value('converge_cdc_relay_active'), 1);
      assert.equal(await value('converge_cdc_oldest_unconfirmed_seconds'), 0);
      const retained = await value('converge_cdc_slot_retained_wal_bytes');
      assert.ok(typeof retained === 'number' && retained >= 0 && Number.isFinite(retained), `retained ${retained}`);
      await relay.stop();
      assert.equal(await value('converge_cdc_relay_active'), 0);
      assert.equal((await fetch(`${url}/healthz`)).status, 503, 'not live once stopped');
    } finally {
      await served.close();
    }
  });
});

test('a row inserted as already published is not published again, and does not hold back the rows after it', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started();
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    await rig.pool.query(
      `INSERT INTO "${rig.schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
       VALUES ('imported-1', 'order', 'imp', 1, 'OrderChanged', '{}', 'published', now())`,
    );
    const [id] = await rig.append(orderEvent('a', 1));
    await waitFor(async () => (await rig.rows()).every((r) => r.status === 'published'), 'a1 marked');
    await waitFor(() => rig.received.length >= 1 && true, 'a1 received');
    assert.deepEqual(rig.arrivals(), [id]);
  });
});

test('ready() resolves once the relay streams, and again for a standby', async () => {
  await withCdcRig(async (rig) => {
    const active = rig.started();
    await active.ready({ timeoutMs: 30_000 });
    assert.equal(active.state, 'active');
    const standby = rig.started();
    await standby.ready({ timeoutMs: 30_000 });
    assert.equal(standby.state, 'standby');
    assert.equal(standby.failure, undefined);
  });
});

test('ready() rejects with SchemaNotMigratedError for a schema never migrated, and the relay stops', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started({ schema: uniqueName('cvt_cdc_missing'), createSlot: false });
    await assert.rejects(relay.ready({ timeoutMs: 30_000 }), SchemaNotMigratedError);
    assert.ok(relay.failure instanceof SchemaNotMigratedError, 'failure names the cause');
    await waitFor(() => relay.state === 'stopped', 'the relay stopped by itself');
  });
});

test('on a server without wal_level=logical, ready() rejects with WalLevelNotLogicalError naming it and the fix, and the relay stops', async () => {
  await withNonLogicalSchema(async (db) => {
    const slot = uniqueName('cvt_cdc_slot');
    const relay = new CdcRelay({
      connectionString: DATABASE_URL,
      amqpUrl: AMQP_URL,
      schema: db.schema,
      slot,
      publication: slot,
      reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 100 },
    });
    const errors: Error[] = [];
    relay.on('error', (err) => errors.push(err));
    relay.start();
    try {
      const err = await relay.ready({ timeoutMs: 30_000 }).then(
        () => assert.fail('ready() resolved'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof WalLevelNotLogicalError, String(err));
      assert.equal(err.code, 'CONVERGE_WAL_LEVEL_NOT_LOGICAL');
      const { rows } = await db.pool.query<{ wal_level: string }>('SHOW wal_level');
      assert.equal(err.walLevel, rows[0]!.wal_level);
      assert.match(
        err.message,
        new RegExp(`PostgreSQL at ${literal(databaseAddress().where)} has wal_level=${err.walLevel}`),
      );
      assert.match(err.message, /needs wal_level=logical.*restart PostgreSQL/);
      assert.equal(relay.failure, err, 'failure names the cause');
      await waitFor(() => relay.state === 'stopped', 'the relay stopped by itself');
      assert.equal(errors.length, 1, 'one attempt, no retries');
      const { rows: publications } = await db.pool.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [slot]);
      assert.equal(publications.length, 0, 'nothing created on the way');
      // createCdcSlot refuses the same way, before creating anything.
      await assert.rejects(
        createCdcSlot(db.pool, { schema: db.schema, slot, publication: slot }),
        WalLevelNotLogicalError,
      );
      const { rows: after } = await db.pool.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [slot]);
      assert.equal(after.length, 0);
    } finally {
      await relay.stop();
    }
  });
});

test('the CDC relay publishes through a transport it is given (in-process): the broker link is the polling relay’s seam', async () => {
  await withCdcRig(async (rig) => {
    await rig.createSlot();
    const transport = createInProcessTransport();
    const connection = await transport.connect({
      name: 'cdc-in-process-test',
      signal: new AbortController().signal,
      onClose: () => undefined,
    });
    const queue = uniqueName('cvt_cdc_ip');
    await connection.declareQueues({
      queue,
      retryQueue: `${queue}.retry`,
      deadQueue: null,
      exchange: rig.exchange,
      bindings: ['#'],
      queueType: 'classic',
      deliveryLimit: 20,
    });
    const received: string[] = [];
    await connection.subscribe(queue, (d) => void received.push(d.properties.messageId ?? ''), { prefetch: 100 });
    // No amqpUrl: a RabbitMQ connection would be a failure of the test, not a fallback.
    const relay = rig.started({ amqpUrl: undefined, transport });
    await relay.ready({ timeoutMs: 20_000 });
    const ids = await rig.append(orderEvent('ip-1', 1), orderEvent('ip-1', 2));
    await waitFor(() => received.length === 2, 'both events through the in-process transport');
    assert.deepEqual(received, ids);
    await waitFor(async () => {
      const { rows } = await rig.pool.query<{ status: string }>(
        `SELECT status FROM "${rig.schema}".outbox WHERE event_id = ANY($1)`,
        [ids],
      );
      return rows.length === 2 && rows.every((r) => r.status === 'published');
    }, 'both rows marked published');
    await connection.close();
  });
});

test('a schema converted to partitions while its slot exists streams on through the partition root', async () => {
  await withCdcRig(async (rig) => {
    let relay = rig.started();
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    await rig.append(orderEvent('p', 1), orderEvent('p', 2));
    await waitFor(() => allPublished(rig), 'the plain outbox rows published');
    await relay.stop();
    await migrate(rig.pool, { schema: rig.schema, partitioned: { intervalMs: 86_400_000, ahead: 1 } });
    relay = rig.started();
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot again');
    await rig.append(orderEvent('p', 3), orderEvent('q', 1));
    await waitFor(async () => (await allPublished(rig)) && (await rig.rows()).length === 4, 'every row published');
    await waitFor(() => new Set(rig.arrivals()).size === 4 || undefined, 'four events at the broker');
    const kind = await rig.pool.query<{ relkind: string }>(`SELECT relkind FROM pg_class WHERE oid = to_regclass($1)`, [
      `"${rig.schema}".outbox`,
    ]);
    assert.equal(kind.rows[0]?.relkind, 'p', 'the outbox the relay streams from is partitioned now');
    assert.deepEqual(Object.fromEntries(firstArrivalOrder(rig)), { 'order/p': [1, 2, 3], 'order/q': [1] });
    await relay.stop();
  });
});
