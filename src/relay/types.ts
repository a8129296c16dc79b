/** What one relay cycle did, and the typed events a relay emits (instrumentation reads these). */

export interface RelayCycleResult {
  claimed: number;
  published: number;
  retried: number;
  failed: number;
  /** Confirmed but not marked because another relay took over the claim (duplicate, not loss). */
  fenced: number;
  /** A later version of a marked event's aggregate is waiting and can now be claimed. */
  unblocked: boolean;
}

/**
 * The events both relays emit for what they publish, meaning the same in each: the metrics read
 * only these, so one registration serves either relay.
 */
export interface PublishEvents {
  /** Events confirmed by the broker and marked published (the CDC relay marks up to markIntervalMs later). */
  published: [eventIds: string[]];
  /** Time from writing each publish to the broker's confirm, in ms, for the events the broker took. */
  confirmed: [latenciesMs: number[]];
  /** The broker did not take an event; it is published again after a backoff. */
  retry: [info: RelayRetryInfo];
  /** An event kept as failed (maxAttempts reached, or no consumer could accept it). */
  failed: [info: RelayRetryInfo];
}

export interface RelayEvents extends PublishEvents {
  /** RabbitMQ blocked the relay's connection (a memory or disk alarm; `reason` as the broker gave it): publishing pauses. */
  blocked: [reason: string | undefined];
  /** The block ended (the alarm cleared, or the blocked connection went away): publishing resumes. */
  unblocked: [];
  /** With claim exclusive: this relay took the relay lock and publishes. */
  active: [];
  /** With claim exclusive: another relay holds the lock; this one retries every standbyRetryMs. */
  standby: [];
  /** A cycle found nothing to claim; the relay now sleeps until NOTIFY or the poll interval. */
  idle: [];
  error: [err: Error];
}

/**
 * A rescheduled or failed row: `attempts` are the failures charged to the event (returns),
 * `brokerRetries` the broker's refusals (nacks, lost confirms or channels), which never fail it.
 */
export interface RelayRetryInfo {
  eventId: string;
  attempts: number;
  brokerRetries: number;
  reason: string;
}
