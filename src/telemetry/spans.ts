import { SpanKind, SpanStatusCode, context, trace, type Span } from '@opentelemetry/api';
import { PublishError } from '../runtime/errors.js';
import {
  ATTR,
  APPEND_ATTRIBUTES,
  appendedAttributes,
  deliveryAttributes,
  errorType,
  publishAttributes,
  type PublishedRow,
  type TracedDelivery,
} from './attributes.js';
import { formatTraceparent, remoteContext } from './traceparent.js';
import { convergeTracer } from './tracer.js';

/**
 * The three spans converge makes, each wrapping one step so its call site stays one line:
 * append (in the caller's active context), publish (PRODUCER, child of the event's traceparent)
 * and process (CONSUMER, child of the message's traceparent). Without an SDK they are no-op
 * spans and the wrapped step runs as if they were not there.
 */

/**
 * Runs an append inside a span in the caller's active context. `append` gets the span's
 * traceparent (undefined without an SDK) for the events that carry none, so the trace goes on
 * through the relay and the consumer.
 */
export async function traceAppend<R extends readonly { eventId: string }[]>(
  append: (traceparent: string | undefined) => Promise<R>,
): Promise<R> {
  const span = convergeTracer().startSpan('append outbox', { kind: SpanKind.PRODUCER, attributes: APPEND_ATTRIBUTES });
  try {
    const appended = await context.with(trace.setSpan(context.active(), span), () =>
      append(formatTraceparent(span.spanContext())),
    );
    span.setAttributes(appendedAttributes(appended.map((event) => event.eventId)));
    return appended;
  } catch (err) {
    failed(span, errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Runs one publish inside a PRODUCER span, child of the event's traceparent (a new trace when
 * it has none), ended when the broker confirmed or the publish failed. `publish` is called
 * synchronously, so the relay's claim order on the channel is kept. A PublishError returned or
 * thrown marks the span failed with its reason (returned, nacked, confirm-timeout, ...).
 */
export async function tracePublish<R>(row: PublishedRow, exchange: string, publish: () => Promise<R>): Promise<R> {
  const parent = remoteContext(row.traceparent);
  const span = convergeTracer().startSpan(
    `publish ${exchange}`,
    { kind: SpanKind.PRODUCER, attributes: publishAttributes(row, exchange) },
    parent,
  );
  try {
    const outcome = await context.with(trace.setSpan(parent, span), publish);
    if (outcome instanceof PublishError) publishFailed(span, outcome);
    return outcome;
  } catch (err) {
    if (err instanceof PublishError) publishFailed(span, err);
    else failed(span, errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

/** What a consumer span needs of a settlement: its action, outcome and reason codes. */
export interface TracedSettlement {
  action: string;
  outcome?: string;
  reason?: string;
}

/**
 * Runs the processing of a batch of deliveries with one CONSUMER span per delivery, each a
 * child of its message's `traceparent` header (a new trace when it has none), ended once the
 * batch's transaction committed or rolled back, with the outcome. For a batch of one, the
 * work runs in that span's context, so spans of the handler (or of a pg instrumentation) are
 * its children; a larger batch serves several traces in one transaction and runs in none.
 */
export async function traceDeliveries<S extends TracedSettlement>(
  deliveries: readonly TracedDelivery[],
  consumer: string,
  process: () => Promise<S[]>,
): Promise<S[]> {
  const spans = deliveries.map((delivery) => startDeliverySpan(delivery, consumer));
  try {
    const only = spans.length === 1 ? spans[0]! : undefined;
    const settlements = only ? await context.with(trace.setSpan(context.active(), only), process) : await process();
    settlements.forEach((settlement, i) => {
      if (spans[i]) settled(spans[i], settlement);
    });
    return settlements;
  } catch (err) {
    for (const span of spans) failed(span, errorType(err));
    throw err;
  } finally {
    for (const span of spans) span.end();
  }
}

function startDeliverySpan(delivery: TracedDelivery, consumer: string): Span {
  return convergeTracer().startSpan(
    `process ${consumer}`,
    { kind: SpanKind.CONSUMER, attributes: deliveryAttributes(delivery, consumer) },
    remoteContext(delivery.properties.headers?.traceparent),
  );
}

/** Quarantined and retried deliveries failed to apply: the span says so, with the reason code. */
function settled(span: Span, settlement: TracedSettlement): void {
  const outcome = settlement.action === 'retry' ? 'retry' : (settlement.outcome ?? settlement.action);
  span.setAttribute(ATTR.outcome, outcome);
  if (settlement.reason !== undefined) span.setAttribute(ATTR.reason, settlement.reason);
  if (outcome === 'retry' || outcome === 'quarantined') failed(span, settlement.reason ?? outcome);
}

function publishFailed(span: Span, err: PublishError): void {
  span.setAttribute(ATTR.errorCode, err.code);
  failed(span, err.reason);
}

/** Status ERROR with a code as its message: an error's own message may quote values, so it stays out. */
function failed(span: Span, code: string): void {
  span.setAttribute(ATTR.errorType, code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}
