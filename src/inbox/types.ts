import type { EventEnvelope } from '../envelope/envelope.js';
import type { ContentConflictError } from '../runtime/errors.js';
import type { UndecodableHeaders } from '../transport/transport.js';

/**
 * A delivery as the consumer core sees it: what the broker handed over, or a parked event
 * rebuilt from the reorder buffer. amqplib's ConsumeMessage is one; so is a parked row.
 * The retry queue copy is made from it, whichever of the two it is.
 */
export interface RawDelivery {
  content: Buffer;
  fields: { exchange: string; routingKey: string; redelivered?: boolean; deliveryTag?: number };
  properties: {
    messageId?: unknown;
    headers?: Record<string, unknown> | undefined;
    /** Set by the transport alone: the header table was not decoded (headers is empty). */
    undecodableHeaders?: UndecodableHeaders;
  };
}

export type QuarantineReason =
  | 'content-conflict'
  /** A field of the envelope is missing or wrong; the detail names the field. */
  | 'invalid-envelope'
  /** The body is not a JSON object at all: empty, not UTF-8, not JSON, nested too deeply. */
  | 'malformed-body'
  /** Over maxEnvelopeBytes; never parsed. */
  | 'body-too-large'
  | 'unknown-event-type'
  | 'stale-version'
  | 'handler-failed'
  | 'handler-permanent'
  | 'unsupported-schema-version'
  /** queueType 'quorum': came back more than deliveryLimit times, so the broker dead-lettered it into `<queue>.dead`. */
  | 'delivery-limit-exceeded'
  /** Found in `<queue>.dead` for another reason the broker gives (rejected, expired, maxlen); the detail names it. */
  | 'dead-lettered'
  /** The header table broke the transport's bounds (depth, entries, bytes) or was malformed; its bytes are in the properties. */
  | 'undecodable-headers'
  /** Its retry copy could not be encoded (amqplib refused a property converge could not leave out); never retried. */
  | 'unencodable-copy';

export type QuarantinedSettlement = {
  action: 'ack';
  outcome: 'quarantined';
  reason: QuarantineReason;
  eventId: string | null;
  quarantineId: string;
  conflict?: ContentConflictError;
};

export type RetrySettlement = {
  action: 'retry';
  delayMs: number;
  attempt: number;
  reason: string;
  eventId: string | null;
};

/**
 * What the transport must do with a delivery once processing returned. `ack` comes only
 * after the local transaction committed (or after the quarantine row committed). Made
 * once, never changed afterwards.
 */
export type Settlement = (
  | { action: 'ack'; outcome: 'duplicate' | 'ignored'; eventId: string }
  /** `occurredAt` comes from the event, for the end-to-end lag (occurredAt → commit). */
  | { action: 'ack'; outcome: 'applied'; eventId: string; occurredAt: string }
  /** Arrived before its predecessor: kept in the reorder buffer (committed), applied once the predecessor is. */
  | { action: 'ack'; outcome: 'parked'; eventId: string }
  | QuarantinedSettlement
  | RetrySettlement
) & {
  /** Converge headers the delivery carried that were not converge's (unsigned or forged), so ignored; for the metric. */
  untrustedHeaders?: readonly string[];
};

/** A delivery whose processing failed, with what was known of it at that point. */
export interface FailedDelivery {
  delivery: RawDelivery;
  envelope: EventEnvelope | null;
  print: string | null;
  attempt: number;
  parked?: boolean;
}

/** A delivery on its way through one local transaction. */
export interface Candidate {
  /** Position in the caller's list; settlements come back keyed by it. */
  index: number;
  delivery: RawDelivery;
  envelope: EventEnvelope;
  print: string;
  attempt: number;
  /** Comes from the reorder buffer, not from the broker: leaves the buffer with its inbox row. */
  parked?: boolean;
}

/** An event drained from the reorder buffer and what became of it; there is no delivery to settle. */
export interface DrainedEvent {
  delivery: RawDelivery;
  settlement: Settlement;
}

/**
 * Where drained events go: the owner of the broker channel. It copies the ones settled
 * `retry` to the retry queue and returns the eventIds it handed back; the reorder buffer
 * then releases exactly those. The flow runs one way: buffer → sink → back as a return value.
 */
export type DrainSink = (drained: DrainedEvent[]) => Promise<string[]>;

export interface AggregateRef {
  aggregateType: string;
  aggregateId: string;
}

export interface ConsumerEvents {
  settled: [settlement: Settlement];
  /** A parked event left the reorder buffer (applied, duplicate, quarantined, or handed back for a retry). */
  drained: [settlement: Settlement];
  conflict: [err: ContentConflictError];
  /** The recovery rate limit changed: events per second, or null once it is lifted. */
  recovering: [limitPerSecond: number | null];
  error: [err: Error];
}

export interface ConsumerStats {
  applied: number;
  duplicate: number;
  ignored: number;
  quarantined: number;
  retried: number;
  /** Early events put into the reorder buffer. */
  parked: number;
  /** Parked events applied from the reorder buffer (also counted in `applied`). */
  drained: number;
}
