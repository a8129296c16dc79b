// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
/**
 * The CDC relay's publishes the broker does not confirm, besides a return (cdc-relay.test.ts): a
 * nack (a full queue with `x-overflow: reject-publish`) and a confirm that does not come back in
 * time (the broker's replies held in a TCP proxy). Either way the stream stops at that event, the
 * stop is counted on its row (a broker retry, never an attempt, never failing it), the slot is
 * never acknowledged past it, and once the broker takes events again it is published, with
 * everything committed after it, in order.
 */
import assert from 'node:assert/strict';
import type { RelayRetryInfo } from '../../src/index.js';
import { parseLsn } from '../../src/relay/cdc/lsn.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';
import { AMQP_URL, test, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig, type CdcRig } from '../support/cdc-fixture.js';

async function allPublished(rig: CdcRig): Promise<boolean> {
  const rows = await rig.rows();
  return rows.length > 0 && rows.every((row) => row.status === 'published');
}

async function assertSlotNotPast(rig: CdcRig, before: string): Promise<void> {
  const slot = await rig.slotInfo();
  assert.ok(
    slot?.confirmedFlushLsn && parseLsn(slot.confirmedFlushLsn) <= parseLsn(before),
    `the slot stays before the stopped event (${slot?.confirmedFlushLsn} <= ${before})`,
  );
}

test('a nacked event stops the stream there, is counted as a broker retry, and is published in order once the queue has room', async () => {
  await withCdcRig(async (rig) => {
    // Invoices also go to a queue that holds one message and refuses more: the broker nacks them.
    const full = await rig.queueIn('invoice.#', { 'x-max-length': 1, 'x-overflow': 'reject-publish' });
    rig.channel.sendToQueue(full, Buffer.from('filler'));
    await waitFor(async () => (await rig.channel.checkQueue(full)).messageCount === 1, 'the filler queued');
    const relay = rig.started();
    const retries: RelayRetryInfo[] = [];
    relay.on('retry', (info) => retries.push(info));
    const failed: RelayRetryInfo[] = [];
    relay.on('failed', (info) => failed.push(info));
    await relay.ready({ timeoutMs: 30_000 });
    const [a1] = await rig.append(orderEvent('a', 1));
    await waitFor(() => allPublished(rig), 'a1 marked');
    await waitFor(() => rig.received.length === 1 && true, 'a1 received');

    const before = await rig.appendBefore(orderEvent('i', 1, { aggregateType: 'invoice' }));
    await rig.append(orderEvent('a', 2), orderEvent('b', 1));
    await rig.append(orderEvent('a', 3));
    await waitFor(() => retries.length >= 3, 'the stream to stop at the nacked event three times');
    assert.deepEqual([...new Set(retries.map((r) => r.reason))], ['nacked']);
    assert.equal(new Set(retries.map((r) => r.eventId)).size, 1, 'always the same event, never one after it');
    await assertSlotNotPast(rig, before);
    const stuck = (await rig.rows()).find((r) => r.aggregate_id === 'i')!;
    assert.equal(retries[0]!.eventId, stuck.event_id);
    assert.equal(stuck.status, 'pending', 'never marked, never failed');
    assert.equal(stuck.attempts, 0, 'a nack is the broker’s, not charged as an attempt');
    assert.ok(stuck.broker_retries >= 3 && stuck.last_error !== null, 'each stop counted on the row');

    // Take everything off the full queue from now on: the nacked event gets in on the next try.
    await rig.channel.consume(full, () => undefined, { noAck: true });
    await waitFor(() => allPublished(rig), 'every row marked published once the queue has room');
    await waitFor(async () => {
      const slot = await rig.slotInfo();
      return slot?.confirmedFlushLsn && parseLsn(slot.confirmedFlushLsn) > parseLsn(before);
    }, 'the slot acknowledged past the event once it was confirmed');
    const rows = await rig.rows();
    assert.deepEqual(new Set(rig.arrivals()), new Set(rows.map((r) => r.event_id)), 'nothing skipped');
    assert.equal(rig.arrivals().filter((id) => id === a1).length, 1, 'a1, acknowledged before, is not resent');
    assert.deepEqual(rig.lastCopyOrder(), { a: [1, 2, 3], b: [1], i: [1] });
    // A nacked copy still reaches the queues that took it (the collecting one): the last copy counts.
    const copies = rig.received.map((r) => `${r.envelope.aggregateId}${r.envelope.aggregateVersion}`);
    const after = copies.slice(copies.lastIndexOf('i1'));
    assert.deepEqual(after, ['i1', 'a2', 'b1', 'a3'], 'the retried event first, then everything committed after it');
    assert.deepEqual(failed, [], 'no row failed for the nacks');
  });
});

test('a confirm that does not come in time stops the stream there; once replies flow, everything is published in order', async () => {
  const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  try {
    await withCdcRig(async (rig) => {
      const relay = rig.started({
        amqpUrl: proxy.url(AMQP_URL),
        confirmTimeoutMs: 300,
        // The reconnects after a timeout meet the held handshake too: each gives up after this.
        amqpSocketOptions: { timeout: 300 },
      });
      const retries: RelayRetryInfo[] = [];
      relay.on('retry', (info) => retries.push(info));
      const marked: string[] = [];
      relay.on('published', (ids) => marked.push(...ids));
      const acknowledged: string[] = [];
      relay.on('acknowledged', (lsn) => acknowledged.push(lsn));
      await relay.ready({ timeoutMs: 30_000 });
      const [a1] = await rig.append(orderEvent('a', 1));
      await waitFor(() => allPublished(rig), 'a1 marked');
      await waitFor(() => rig.received.length === 1 && true, 'a1 received');
      await waitFor(() => acknowledged.length > 0, 'a1 acknowledged');

      proxy.holdReplies();
      const before = await rig.appendBefore(orderEvent('a', 2));
      await rig.append(orderEvent('b', 1));
      await waitFor(
        () => retries.some((r) => r.reason === 'confirm-timeout'),
        'the stream to stop at an unconfirmed event',
      );
      const stopped = retries.find((r) => r.reason === 'confirm-timeout')!;
      const during = await rig.rows();
      const a2 = during.find((r) => r.aggregate_id === 'a' && r.aggregate_version === '2')!;
      assert.equal(stopped.eventId, a2.event_id, 'the stream stopped at the first event without its confirm');
      assert.ok(a2.broker_retries >= 1 && a2.attempts === 0 && a2.last_error !== null, 'counted as a broker retry');
      assert.ok(
        during.filter((r) => r.event_id !== a1).every((r) => r.status === 'pending'),
        'nothing marked without its confirm',
      );
      assert.deepEqual(marked, [a1]);
      await assertSlotNotPast(rig, before);

      proxy.releaseReplies();
      await waitFor(() => allPublished(rig), 'every row marked published once replies flow');
      await waitFor(async () => {
        const slot = await rig.slotInfo();
        return slot?.confirmedFlushLsn && parseLsn(slot.confirmedFlushLsn) > parseLsn(before);
      }, 'the slot acknowledged past the event once it was confirmed');
      const rows = await rig.rows();
      await waitFor(
        () => rows.every((r) => rig.arrivals().includes(r.event_id)),
        'every event taken off the collecting queue',
      );
      assert.equal(rig.arrivals().filter((id) => id === a1).length, 1, 'a1, acknowledged before, is not resent');
      assert.deepEqual(rig.lastCopyOrder(), { a: [1, 2], b: [1] });
      assert.ok(
        retries.every((r) => r.eventId === a2.event_id),
        `every stop at a2, never one after it (${retries.map((r) => r.reason).join(',')})`,
      );
    });
  } finally {
    await proxy.close();
  }
});
