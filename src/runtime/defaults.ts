/**
 * Names and settings shared by several components. They live at the bottom of the tree so
 * that a relay, a consumer and an operator tool agree on them without importing each other.
 */

/** Schema holding converge's tables when the caller names none. */
export const DEFAULT_SCHEMA = 'converge';

/** Topic exchange the relay publishes to and consumers bind to. */
export const DEFAULT_EXCHANGE = 'converge.events';

/** NOTIFY channel the outbox trigger (migration 2) signals on; the payload is the schema name. */
export const OUTBOX_CHANNEL = 'converge_outbox';

/** How long a publisher waits for a broker confirm before treating the publish as failed, in ms. */
export const DEFAULT_CONFIRM_TIMEOUT_MS = 10_000;

/**
 * Delay schedule for reconnecting to RabbitMQ or PostgreSQL after losing them (relay and consumer).
 * The cap is low on purpose: a service that comes back is used again within a second (a
 * 10 s cap left a consumer idle for 7 s after a broker restart), and one attempt every
 * 0.5–1 s against a service that stays down costs it next to nothing.
 */
export const DEFAULT_RECONNECT_BACKOFF = { initialDelayMs: 100, maxDelayMs: 1_000, factor: 2 } as const;

/** Delays between a consumer's attempts at one delivery. */
export const DEFAULT_CONSUMER_BACKOFF = { initialDelayMs: 100, maxDelayMs: 10_000, factor: 2 } as const;

/** Attempts before the relay marks an event failed, or a consumer quarantines a delivery. */
export const DEFAULT_MAX_ATTEMPTS = 10;
