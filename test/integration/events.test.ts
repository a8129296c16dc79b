/**
 * Typed events with runtime schemas (defineEvents) at both ends: the producer refuses a payload
 * its schema rejects (nothing written, the error names paths, never values); the consumer
 * quarantines one as an invalid envelope (never applied), hands handlers the schema's output,
 * and treats a type the catalog does not list as an unknown event type.
 */
import assert from 'node:assert/strict';
import { z } from 'zod';
import { appendManyToOutbox, appendToOutbox, applyIncrement, defineEvents, withTransaction } from '../../src/index.js';
import { PayloadValidationError, EnvelopeValidationError } from '../../src/errors.js';
import { withEnv, envelope, quarantineRows, capturingLogger, SECRET } from '../support/consumer-env.js';
import { createTestSchema, describe, test, waitFor } from '../support/rig.js';

const orderEvents = defineEvents({
  AmountAdded: z.object({ delta: z.number().int(), note: z.string().default('none') }),
  OrderClosed: z.object({ reason: z.string() }),
});

const order = { aggregateType: 'order', aggregateId: 'o1' };

describe('typed events at the producer', () => {
  test('a payload its schema rejects throws PayloadValidationError naming paths, not values, and writes nothing', async () => {
    const db = await createTestSchema('cvt_events');
    try {
      const options = { schema: db.schema, events: orderEvents };
      const failure = await withTransaction(db.pool, (tx) =>
        appendManyToOutbox(
          tx,
          [
            { ...order, aggregateVersion: 1, eventType: 'AmountAdded', payload: { delta: 5 } },
            // A JavaScript caller (or a cast) gets past the compiler; the schema still stops it.
            {
              ...order,
              aggregateVersion: 2,
              eventType: 'AmountAdded',
              payload: { delta: SECRET } as unknown as { delta: number },
            },
          ],
          options,
        ),
      ).then(
        () => assert.fail('expected a PayloadValidationError'),
        (err: unknown) => err,
      );
      assert.ok(failure instanceof PayloadValidationError);
      assert.ok(failure instanceof EnvelopeValidationError, 'a payload error is an envelope error too');
      assert.equal(failure.code, 'CONVERGE_INVALID_PAYLOAD');
      assert.equal(failure.eventType, 'AmountAdded');
      assert.deepEqual(failure.paths, ['delta']);
      assert.ok(!failure.message.includes(SECRET), failure.message);
      const counted = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${db.schema}".outbox`);
      assert.equal(counted.rows[0]?.n, '0');

      await withTransaction(db.pool, (tx) =>
        appendToOutbox(tx, { ...order, aggregateVersion: 1, eventType: 'AmountAdded', payload: { delta: 5 } }, options),
      );
      const { rows } = await db.pool.query<{ payload: unknown }>(`SELECT payload FROM "${db.schema}".outbox`);
      assert.deepEqual(
        rows,
        [{ payload: { delta: 5 } }],
        'the payload is written as given, not as the schema outputs it',
      );
    } finally {
      await db.close();
    }
  });
});

describe('typed events at the consumer', () => {
  test('handlers get the schema output; a failing payload is quarantined unapplied; an unlisted type is unknown', async () => {
    await withEnv(async (env) => {
      await env.pool.query(
        `CREATE TABLE "${env.schema}".notes (id text PRIMARY KEY, total int NOT NULL, note text NOT NULL)`,
      );
      const logger = capturingLogger();
      const consumer = env.start({
        logger,
        events: orderEvents,
        handlers: {
          // No casts: event.payload is { delta: number; note: string } here.
          AmountAdded: async (event, { tx, schema }) => {
            await applyIncrement(tx, { projection: 'notes', event, schema }, async (e) =>
              tx.query(
                `INSERT INTO "${schema}".notes (id, total, note) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET total = notes.total + EXCLUDED.total, note = EXCLUDED.note`,
                [e.aggregateId, e.payload.delta, e.payload.note],
              ),
            );
          },
        },
      });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 5 }));
      await env.publish(envelope('E2', 'o1', 2, { delta: SECRET }));
      await env.publish(envelope('E3', 'o1', 2, { delta: 1 }, 'Unlisted'));
      await waitFor(
        () => consumer.stats.applied === 1 && consumer.stats.quarantined === 2,
        'one applied, two quarantined',
      );

      const { rows } = await env.pool.query(`SELECT id, total, note FROM "${env.schema}".notes`);
      assert.deepEqual(
        rows,
        [{ id: 'o1', total: 5, note: 'none' }],
        'the default the schema filled in reached the handler',
      );
      const quarantined = (await quarantineRows(env)).sort((a, b) => a.event_id!.localeCompare(b.event_id!));
      assert.deepEqual(
        quarantined.map((r) => [r.event_id, r.reason]),
        [
          ['E2', 'invalid-envelope'],
          ['E3', 'unknown-event-type'],
        ],
      );
      assert.match(quarantined[0]!.detail, /payload.*AmountAdded schema at "delta"/);
      assert.ok(!quarantined[0]!.detail.includes(SECRET));
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E2'`), 0);
      assert.ok(!logger.records.some((line) => line.includes(SECRET)), 'the payload never reaches the logs');
    });
  });
});
