import assert from 'node:assert/strict';
import { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY } from '../../src/transport/wire.js';
import { outboxRowToEnvelope, type OutboxEnvelopeRow } from '../../src/relay/index.js';
import { withTransaction, appendToOutbox } from '../../src/index.js';
import { parseLsn } from '../../src/cdc/lsn.js';
import { test, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig, type CdcRig } from '../support/cdc-fixture.js';

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
      assert.deepEqual(got.properties.headers, expected.options.headers);
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
