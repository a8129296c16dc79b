/**
 * OpenTelemetry spans end to end against the real services, with the SDK's in-memory exporter:
 * an append inside the caller's active span, the relay's PRODUCER span and the consumer's
 * CONSUMER span share one trace (the append span's context travels as the event's traceparent),
 * a publish the broker returns ends its span with status error and the reason, a redelivered
 * copy shows as a duplicate, and no attribute carries a payload value or an aggregate id.
 */
import assert from 'node:assert/strict';
import { SpanKind, SpanStatusCode, context, trace, type AttributeValue } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { appendToOutbox, withTransaction, type EventEnvelope } from '../../src/index.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { describe, it, waitFor } from '../support/rig.js';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** Marks a payload value and an aggregate id: neither may appear in any span attribute. */
const SECRET = 'SECRET-PII-42';

const spans = () => exporter.getFinishedSpans();
const ofMessage = (eventId: string, kind: SpanKind) =>
  spans().filter((s) => s.kind === kind && s.attributes['messaging.message.id'] === eventId);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan) => span.spanContext().spanId;
const traceOf = (span: ReadableSpan) => span.spanContext().traceId;

describe('OpenTelemetry spans', () => {
  it('one trace from the append through the relay to the consumer; a returned publish is an error; nothing personal in attributes', () =>
    withBrokerFixture('cvotel', async ({ db, exchange, queue, startConsumer, startRelay, publish }) => {
      await db.pool.query(`CREATE TABLE "${db.schema}".seen (event_id text PRIMARY KEY)`);
      let handlerSpan: string | undefined;
      const consumer = startConsumer({
        // 'lost.*' is bound nowhere: its events come back to the relay as returned.
        bindings: ['order.*'],
        handlers: {
          OrderPlaced: async (event, { tx }) => {
            handlerSpan = trace.getActiveSpan()?.spanContext().spanId;
            await tx.query(`INSERT INTO "${db.schema}".seen (event_id) VALUES ($1)`, [event.eventId]);
          },
        },
      });
      const relay = startRelay({ backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 } });
      await consumer.ready();
      await relay.ready();
      const event = {
        eventId: 'placed-1',
        aggregateType: 'order',
        aggregateId: `o-${SECRET}`,
        aggregateVersion: 1,
        eventType: 'OrderPlaced',
        payload: { note: SECRET, amount: 12 },
      };
      // The caller's request span: the append must be its child.
      const root = await trace.getTracer('test').startActiveSpan('POST /orders', async (span) => {
        await withTransaction(db.pool, (tx) => appendToOutbox(tx, event, { schema: db.schema }));
        span.end();
        return span;
      });
      // Appended outside any span: a trace of its own starts at the append.
      await withTransaction(db.pool, (tx) =>
        appendToOutbox(
          tx,
          { ...event, eventId: 'lost-1', aggregateType: 'lost', eventType: 'OrderLost' },
          { schema: db.schema },
        ),
      );

      const consumed = await waitFor(
        () => ofMessage('placed-1', SpanKind.CONSUMER)[0],
        'the consumer span of placed-1',
      );
      const failedPublish = await waitFor(
        () => ofMessage('lost-1', SpanKind.PRODUCER).find((s) => s.name.startsWith('publish')),
        'the producer span of the returned publish',
      );

      // The append: a PRODUCER (create) span in the caller's context, its context stored as the traceparent.
      const [append] = spans().filter(
        (s) => s.name === 'append outbox' && s.attributes['messaging.message.id'] === 'placed-1',
      );
      assert.ok(append, 'an append span for placed-1');
      assert.equal(append.kind, SpanKind.PRODUCER);
      assert.equal(parentOf(append), root.spanContext().spanId, 'the append is a child of the active span');
      assert.equal(traceOf(append), root.spanContext().traceId);
      assert.equal(append.attributes['messaging.operation.type'], 'create');
      assert.equal(append.attributes['messaging.system'], 'rabbitmq');
      assert.equal(append.instrumentationScope.name, 'converge-events');
      assert.match(append.instrumentationScope.version ?? '', /^\d+\.\d+\.\d+/);
      const { rows } = await db.pool.query<{ event_id: string; traceparent: string }>(
        `SELECT event_id, traceparent FROM "${db.schema}".outbox ORDER BY event_id`,
      );
      const stored = new Map(rows.map((r) => [r.event_id, r.traceparent]));
      assert.equal(
        stored.get('placed-1'),
        `00-${traceOf(append)}-${idOf(append)}-01`,
        'the append span is the event traceparent',
      );

      // The publish: a PRODUCER (send) span, child of the append span, ended with the confirm.
      const [published] = ofMessage('placed-1', SpanKind.PRODUCER).filter((s) => s.name === `publish ${exchange}`);
      assert.ok(published, 'a publish span for placed-1');
      assert.equal(traceOf(published), root.spanContext().traceId);
      assert.equal(parentOf(published), idOf(append));
      assert.equal(published.parentSpanContext?.isRemote, true, 'continued from the stored traceparent');
      assert.deepEqual(
        {
          system: published.attributes['messaging.system'],
          operation: published.attributes['messaging.operation.type'],
          name: published.attributes['messaging.operation.name'],
          destination: published.attributes['messaging.destination.name'],
          eventType: published.attributes['converge.event.type'],
          aggregateType: published.attributes['converge.aggregate.type'],
          version: published.attributes['converge.aggregate.version'],
        },
        {
          system: 'rabbitmq',
          operation: 'send',
          name: 'publish',
          destination: exchange,
          eventType: 'OrderPlaced',
          aggregateType: 'order',
          version: 1,
        },
      );
      assert.equal(published.status.code, SpanStatusCode.UNSET);

      // The consumer: a CONSUMER (process) span, child of the message's traceparent, with the outcome.
      assert.equal(traceOf(consumed), root.spanContext().traceId, 'one trace from the request to the consumer');
      assert.equal(parentOf(consumed), idOf(append));
      assert.equal(consumed.name, `process ${queue}`);
      assert.equal(consumed.attributes['converge.consumer.outcome'], 'applied');
      assert.equal(consumed.attributes['messaging.operation.type'], 'process');
      assert.equal(consumed.attributes['messaging.consumer.group.name'], queue);
      assert.equal(consumed.attributes['messaging.destination.name'], exchange);
      assert.equal(consumed.status.code, SpanStatusCode.UNSET);
      assert.equal(handlerSpan, idOf(consumed), 'the handler runs in the consumer span');
      assert.ok(
        consumed.startTime[0] * 1e9 + consumed.startTime[1] >= published.startTime[0] * 1e9 + published.startTime[1],
      );

      // A returned publish: status error with the reason, in the trace its append started.
      const [lostAppend] = spans().filter(
        (s) => s.name === 'append outbox' && s.attributes['messaging.message.id'] === 'lost-1',
      );
      assert.ok(lostAppend);
      assert.equal(parentOf(lostAppend), undefined, 'no active span: the append starts a trace');
      assert.notEqual(traceOf(lostAppend), root.spanContext().traceId);
      assert.equal(parentOf(failedPublish), idOf(lostAppend));
      assert.equal(traceOf(failedPublish), traceOf(lostAppend));
      assert.deepEqual(failedPublish.status, { code: SpanStatusCode.ERROR, message: 'returned' });
      assert.equal(failedPublish.attributes['error.type'], 'returned');
      assert.equal(failedPublish.attributes['converge.error.code'], 'CONVERGE_PUBLISH_RETURNED');

      // A second copy of placed-1 (as a relay re-publish after a lost confirm would send it): a duplicate.
      const copy: EventEnvelope = {
        ...event,
        schemaVersion: 1,
        kind: 'incremental',
        occurredAt: new Date().toISOString(),
        traceparent: stored.get('placed-1')!,
      };
      await publish([copy]);
      const duplicate = await waitFor(
        () =>
          ofMessage('placed-1', SpanKind.CONSUMER).find(
            (s) => s.attributes['converge.consumer.outcome'] === 'duplicate',
          ),
        'the consumer span of the duplicate',
      );
      assert.equal(parentOf(duplicate), idOf(append));
      assert.equal(traceOf(duplicate), root.spanContext().traceId);

      // Invariant 6: attribute values are ids, types and codes; nothing from the payload, no aggregate id.
      const values: AttributeValue[] = spans().flatMap((s) =>
        Object.values(s.attributes).filter((v) => v !== undefined),
      );
      assert.ok(values.length > 20);
      for (const value of values)
        assert.equal(String(value).includes(SECRET), false, `attribute value ${String(value)}`);
      for (const span of spans()) assert.equal((span.status.message ?? '').includes(SECRET), false);
      assert.equal(
        spans().every((s) => s.instrumentationScope.name === 'converge-events' || s.name === 'POST /orders'),
        true,
      );
    }));
});
