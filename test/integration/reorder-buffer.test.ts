/**
 * The reorder buffer's drain, seen from its owner: drained events go one way, to the drain
 * sink; the eventIds the sink hands back (to the broker) are released from the buffer, the
 * others stay parked and drain again later.
 */
import assert from 'node:assert/strict';
import {
  applyIncrement,
  silentLogger,
  type DrainedEvent,
  type EventEnvelope,
  type EventHandler,
} from '../../src/index.js';
import type { RawDelivery } from '../../src/internal/index.js';
import { DeliveryProcessor, ProcessorSetup } from '../../src/inbox/processor.js';
import { resolveProcessorOptions } from '../../src/inbox/options.js';
import { describe, it, createTestSchema, deliveryOf, orderEvent } from '../support/rig.js';

const envelope = (eventId: string, version: number): EventEnvelope =>
  orderEvent(eventId, 'o1', version, { payload: {} });

const delivery = (e: EventEnvelope): RawDelivery => deliveryOf(e, { exchange: 'converge.events', deliveryTag: 7 });

describe('reorder buffer drain', () => {
  it('hands drained events to the sink once; what the sink handed back leaves the buffer, the rest stays parked', async () => {
    const db = await createTestSchema('cvt_reorder');
    let failE3 = true;
    const handler: EventHandler = async (event, { tx }) => {
      await applyIncrement(tx, { projection: 'p', event, schema: db.schema }, async () => {
        if (event.eventId === 'E3' && failE3) throw new Error('not yet');
        return 'unchanged';
      });
    };
    const sunk: DrainedEvent[][] = [];
    let handBack = false;
    const options = resolveProcessorOptions({
      consumer: 'c',
      pool: db.pool,
      schema: db.schema,
      handlers: { AmountAdded: handler },
      logger: silentLogger,
    });
    const processor = new DeliveryProcessor(
      new ProcessorSetup(options, async (drained) => {
        sunk.push(drained);
        return handBack
          ? drained.flatMap((d) =>
              d.settlement.action === 'retry' && d.settlement.eventId ? [d.settlement.eventId] : [],
            )
          : [];
      }),
    );
    const parked = async () =>
      (
        await db.pool.query<{ event_id: string }>(`SELECT event_id FROM "${db.schema}".parked ORDER BY event_id`)
      ).rows.map((r) => r.event_id);
    try {
      assert.equal((await processor.process(delivery(envelope('E1', 1)))).action, 'ack');
      assert.deepEqual(await processor.process(delivery(envelope('E3', 3))), {
        action: 'ack',
        outcome: 'parked',
        eventId: 'E3',
      });
      assert.equal(sunk.length, 0, 'nothing drained yet');

      // E2 applies; E3 drains and fails: the sink keeps nothing, so E3 stays parked.
      assert.equal((await processor.process(delivery(envelope('E2', 2)))).action, 'ack');
      assert.equal(sunk.length, 1);
      assert.deepEqual(
        sunk[0]!.map((d) => [d.settlement.action, d.settlement.eventId]),
        [['retry', 'E3']],
      );
      assert.equal(
        sunk[0]![0]!.delivery.fields.deliveryTag,
        7,
        'the drained delivery is the one that was parked, as a RawDelivery',
      );
      assert.deepEqual(await parked(), ['E3']);

      // Drained again, the sink hands it back this time: it leaves the buffer.
      handBack = true;
      assert.equal(await processor.drainReady(), 0, 'a retry does not count as leaving the buffer');
      assert.deepEqual(
        sunk[1]!.map((d) => [d.settlement.action, d.settlement.eventId]),
        [['retry', 'E3']],
      );
      assert.deepEqual(await parked(), []);

      // A copy of E3 comes back through the broker and applies.
      failE3 = false;
      assert.equal(((await processor.process(delivery(envelope('E3', 3)))) as { outcome?: string }).outcome, 'applied');
      assert.equal(sunk.length, 2, 'a fresh delivery is settled by its caller, not the sink');
    } finally {
      await processor.close();
      await db.close();
    }
  });
});
