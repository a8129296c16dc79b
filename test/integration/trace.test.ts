/**
 * Trace context end to end against the real services: the traceparent given to appendToOutbox
 * is stored with the row, published by the relay in the body and the `traceparent` header, seen
 * by the consumer's handler, and joins the consumer's warn lines by trace id.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, silentLogger, withTransaction, type EventEnvelope, type Logger } from '../../src/index.js';
import { HEADER } from '../../src/internal/index.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { describe, it, waitFor } from '../support/rig.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

/** Keeps warn lines (their fields, never printed) to check what a log line carries. */
function capturingLogger(lines: Record<string, unknown>[]): Logger {
  return { ...silentLogger, warn: (obj) => void lines.push({ ...obj }) };
}

describe('trace context', () => {
  it('carries traceparent from the outbox row through the message into the handler and the log lines, and leaves it out when there is none', () =>
    withBrokerFixture('cvtrace', async ({ db, channel, exchange, startConsumer, startRelay, brokerName }) => {
      const tap = brokerName('tap');
      const seen = new Map<string, EventEnvelope>();
      const warnings: Record<string, unknown>[] = [];
      const consumer = startConsumer({
        logger: capturingLogger(warnings),
        backoff: { initialDelayMs: 10, maxDelayMs: 20 },
        handlers: {
          Traced: async (event, { attempt }) => {
            // The first attempt fails so the consumer writes its 'rolled back' warn line.
            if (attempt === 1) throw new Error('first attempt fails');
            seen.set(event.eventId, event);
          },
        },
      });
      startRelay();
      await consumer.ready();
      // A second queue on the same exchange shows the raw message as the relay published it.
      await channel.assertQueue(tap, { durable: false });
      await channel.bindQueue(tap, exchange, '#');

      await withTransaction(db.pool, async (tx) => {
        await appendToOutbox(
          tx,
          {
            eventId: 'with-trace',
            aggregateType: 'order',
            aggregateId: 'o1',
            aggregateVersion: 1,
            eventType: 'Traced',
            payload: {},
            traceparent: TRACEPARENT,
          },
          { schema: db.schema },
        );
        await appendToOutbox(
          tx,
          {
            eventId: 'without-trace',
            aggregateType: 'order',
            aggregateId: 'o2',
            aggregateVersion: 1,
            eventType: 'Traced',
            payload: {},
          },
          { schema: db.schema },
        );
      });
      const stored = await db.pool.query(`SELECT event_id, traceparent FROM "${db.schema}".outbox ORDER BY event_id`);
      assert.deepEqual(stored.rows, [
        { event_id: 'with-trace', traceparent: TRACEPARENT },
        { event_id: 'without-trace', traceparent: null },
      ]);

      await waitFor(() => seen.size === 2, 'both events handled');
      assert.equal(
        seen.get('with-trace')!.traceparent,
        TRACEPARENT,
        'the handler sees the producer trace context on the envelope',
      );
      assert.equal('traceparent' in seen.get('without-trace')!, false, 'no trace context invented');

      const raw = new Map<string, { body: EventEnvelope; header: unknown }>();
      await waitFor(async () => {
        const message = await channel.get(tap, { noAck: true });
        if (message)
          raw.set(message.properties.messageId as string, {
            body: JSON.parse(message.content.toString()) as EventEnvelope,
            header: message.properties.headers?.[HEADER.traceparent],
          });
        return raw.size === 2;
      }, 'both raw messages on the tap queue');
      assert.equal(raw.get('with-trace')!.body.traceparent, TRACEPARENT, 'in the body the consumer parses');
      assert.equal(
        raw.get('with-trace')!.header,
        TRACEPARENT,
        'and in the AMQP header, for tools that read headers only',
      );
      assert.equal(raw.get('without-trace')!.header, undefined);
      assert.equal('traceparent' in raw.get('without-trace')!.body, false);

      const rolledBack = (eventId: string) =>
        warnings.find((w) => w.eventId === eventId && w.reason === 'handler-error');
      assert.equal(
        rolledBack('with-trace')?.traceId,
        TRACE_ID,
        'the warn line carries the trace id, nothing else of the traceparent',
      );
      assert.ok(rolledBack('without-trace'));
      assert.equal('traceId' in rolledBack('without-trace')!, false);
    }));
});
