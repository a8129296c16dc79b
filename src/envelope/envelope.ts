export type EventKind = 'incremental' | 'snapshot';

/**
 * The self-contained event as it travels: the AMQP body is exactly this object as JSON.
 * `eventId` is decided in the source transaction and reused by every retry.
 */
export interface EventEnvelope<P = unknown, T extends string = string> {
  eventId: string;
  aggregateType: string;
  aggregateId: string;
  /** Version of the aggregate this event produced; 1 for the first event. */
  aggregateVersion: number;
  eventType: T;
  schemaVersion: number;
  kind: EventKind;
  payload: P;
  /** ISO-8601 timestamp, decided in the source transaction. */
  occurredAt: string;
  traceparent?: string;
  tenantId?: string;
}

/** What a service hands to `appendToOutbox`; omitted fields get their defaults in the source transaction. */
export interface NewEvent<P = unknown, T extends string = string> {
  /** Defaults to a random UUID generated before the insert. */
  eventId?: string;
  aggregateType: string;
  aggregateId: string | number;
  aggregateVersion: number;
  eventType: T;
  /** Defaults to 1. */
  schemaVersion?: number;
  /** Defaults to 'incremental'. */
  kind?: EventKind;
  payload: P;
  /** Defaults to the source transaction's `now()`. */
  occurredAt?: Date | string;
  traceparent?: string;
  tenantId?: string;
}
