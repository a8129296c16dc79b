/**
 * Telemetry without an OpenTelemetry SDK (the default for a service that never registers one):
 * every wrapper runs its step unchanged, no span records anything, and appendManyToOutbox
 * invents no traceparent. With an SDK: test/integration/telemetry.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROOT_CONTEXT, TraceFlags, context, trace } from '@opentelemetry/api';
import type { Executor } from '../../src/db/executor.js';
import { appendManyToOutbox, appendToOutbox } from '../../src/outbox/append.js';
import { PublishError } from '../../src/runtime/errors.js';
import {
  convergeTracer,
  formatTraceparent,
  parseTraceparent,
  remoteContext,
  traceAppend,
  traceDeliveries,
  tracePublish,
} from '../../src/telemetry/index.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

/** An executor that answers the outbox insert and keeps its parameters. */
function recordingExecutor(calls: unknown[][]): Executor {
  return {
    async query<R>(_text: string, values: unknown[] = []) {
      calls.push(values);
      const ids = values[0] as string[];
      return { rows: ids.map((id, i) => ({ event_id: id, position: String(i + 1) })) as R[], rowCount: ids.length };
    },
  };
}

const event = (eventId: string, traceparent?: string) => ({
  eventId,
  aggregateType: 'order',
  aggregateId: 'o-1',
  aggregateVersion: 1,
  eventType: 'OrderPlaced',
  payload: { secret: 'SECRET-PII-42' },
  ...(traceparent === undefined ? {} : { traceparent }),
});

describe('telemetry without an SDK', () => {
  it('hands out non-recording spans with an invalid context, so nothing is recorded', () => {
    const span = convergeTracer().startSpan('probe');
    assert.equal(span.isRecording(), false);
    assert.equal(formatTraceparent(span.spanContext()), undefined, 'no traceparent from a no-op span');
    span.end();
  });

  it('appends without inventing a traceparent, and keeps the one an event brings', async () => {
    const calls: unknown[][] = [];
    const executor = recordingExecutor(calls);
    const appended = await appendManyToOutbox(executor, [event('e-1'), event('e-2', TRACEPARENT)]);
    assert.deepEqual(
      appended.map((a) => a.eventId),
      ['e-1', 'e-2'],
    );
    assert.deepEqual(calls[0]![9], [null, TRACEPARENT], 'the traceparent column: null, then the given one');
    await appendToOutbox(executor, event('e-3'));
    assert.deepEqual(calls[1]![9], [null]);
  });

  it('runs the wrapped step and returns its result, failures included', async () => {
    const appended = await traceAppend(async (traceparent) => {
      assert.equal(traceparent, undefined);
      assert.equal(trace.getActiveSpan()?.isRecording() ?? false, false);
      return [{ eventId: 'e-1' }];
    });
    assert.deepEqual(appended, [{ eventId: 'e-1' }]);
    await assert.rejects(
      traceAppend(async () => {
        throw new Error('insert failed');
      }),
      /insert failed/,
    );

    const row = {
      event_id: 'e-1',
      event_type: 'OrderPlaced',
      aggregate_type: 'order',
      aggregate_version: '1',
      traceparent: TRACEPARENT,
    };
    assert.equal(await tracePublish(row, 'converge.events', async () => 4.2), 4.2);
    const returned = new PublishError('returned');
    assert.equal(await tracePublish(row, 'converge.events', async () => returned), returned);

    const delivery = {
      fields: { exchange: 'converge.events' },
      properties: { messageId: 'e-1', headers: { traceparent: TRACEPARENT } },
    };
    const settlements = await traceDeliveries([delivery, delivery], 'view', async () => [
      { action: 'ack', outcome: 'applied' },
      { action: 'retry', reason: 'handler-error' },
    ]);
    assert.equal(settlements.length, 2);
    await assert.rejects(
      traceDeliveries([delivery], 'view', async () => {
        throw new Error('processing broke');
      }),
      /processing broke/,
    );
  });

  it('continues a remote trace only from a well-formed traceparent', () => {
    assert.deepEqual(parseTraceparent(TRACEPARENT), {
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    for (const bad of [
      undefined,
      42,
      '',
      `ff-${TRACE_ID}-${SPAN_ID}-01`,
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`,
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${SPAN_ID}`,
    ])
      assert.equal(parseTraceparent(bad), undefined, String(bad));
    assert.equal(formatTraceparent(parseTraceparent(TRACEPARENT)!), TRACEPARENT, 'round trip');
    assert.equal(
      formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.NONE }),
      `00-${TRACE_ID}-${SPAN_ID}-00`,
    );
    assert.equal(trace.getSpanContext(remoteContext(TRACEPARENT))?.spanId, SPAN_ID);
    assert.equal(remoteContext('nonsense'), ROOT_CONTEXT);
    assert.equal(context.active(), ROOT_CONTEXT, 'no context manager, nothing leaked into the active context');
  });
});
