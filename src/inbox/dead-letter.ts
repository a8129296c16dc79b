import type pg from 'pg';
import { backoffDelay, type BackoffPolicy } from '../runtime/backoff.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import type { Logger } from '../runtime/logger.js';
import type {
  Subscription,
  TransportConnection,
  TransportDelivery,
  UndecodableHeaders,
} from '../transport/transport.js';
import { Idle } from '../runtime/sleep.js';
import type { HeaderKey } from './header-key.js';
import { trustHeaders } from './headers.js';
import { Settler } from './settle.js';
import type { QuarantineReason, QuarantinedSettlement } from './types.js';

/** Dead messages held at once: each is quarantined in turn, so more would only wait in memory. */
const DEAD_LETTER_PREFETCH = 16;

/** The newest death the broker recorded on a message, as far as its headers tell. */
export interface Death {
  /** The broker's reason: `delivery_limit`, `rejected`, `expired`, `maxlen`; null without any record. */
  reason: string | null;
  /** The queue it died in. */
  queue: string | null;
}

/**
 * RabbitMQ lists x-death newest first and, since 3.13, also names the newest in
 * x-last-death-*. x-first-death-* is the oldest: after a trip through the retry queue it says
 * `expired`, whatever came later, so it is only the last resort.
 */
export function lastDeath(headers: Record<string, unknown> | undefined): Death {
  const h = headers ?? {};
  const deaths = h['x-death'];
  const newest: unknown = Array.isArray(deaths) ? deaths[0] : undefined;
  const entry = typeof newest === 'object' && newest !== null ? (newest as Record<string, unknown>) : {};
  const text = (...values: unknown[]) => values.find((v): v is string => typeof v === 'string') ?? null;
  return {
    reason: text(h['x-last-death-reason'], entry.reason, h['x-first-death-reason']),
    queue: text(h['x-last-death-queue'], entry.queue, h['x-first-death-queue']),
  };
}

/**
 * What the quarantine row says about a message found in a dead queue (never anything from its body).
 * Headers the transport would not decode hide the broker's x-death record too: that is the reason then.
 */
export function deadLetterVerdict(
  death: Death,
  deadQueue: string,
  undecodable?: Pick<UndecodableHeaders, 'detail'>,
): { reason: QuarantineReason; detail: string } {
  if (undecodable) return { reason: 'undecodable-headers', detail: `found in ${deadQueue}: ${undecodable.detail}` };
  const from = death.queue === null ? 'its queue' : `queue ${death.queue}`;
  if (death.reason === 'delivery_limit')
    return {
      reason: 'delivery-limit-exceeded',
      detail: `the broker dead-lettered it from ${from} into ${deadQueue}: returned (nack, lost channel or connection) more often than the delivery limit allows`,
    };
  if (death.reason === null)
    return {
      reason: 'dead-lettered',
      detail: `found in ${deadQueue} without an x-death record (published there directly?)`,
    };
  return {
    reason: 'dead-lettered',
    detail: `the broker dead-lettered it from ${from} into ${deadQueue}: ${death.reason}`,
  };
}

/** A messageId that names the event, as the relay sets it; anything blank or not text names nothing. */
function messageIdOf(message: TransportDelivery): string | null {
  const id: unknown = message.properties.messageId;
  return typeof id === 'string' && id.trim() !== '' ? id : null;
}

/** What a dead-letter intake needs of its consumer's options. */
export interface DeadLetterOptions {
  schema: string;
  consumer: string;
  backoff: BackoffPolicy;
  logger: Logger;
}

export interface DeadLetterHooks {
  /** The consumer's header key: a dead message's attempt and origin headers count only when signed with it. */
  headerKey: HeaderKey;
  /** Each quarantined dead message, for the consumer's stats and `settled` event. */
  onQuarantined: (settlement: QuarantinedSettlement) => void;
  /** The channel or subscription went away while the consumer did not close it. */
  onLost: () => void;
}

interface DeadLetterScope extends DeadLetterOptions, DeadLetterHooks {
  deadQueue: string;
  pool: pg.Pool;
  schemaRef: SchemaRef;
}

/**
 * Consumes `<queue>.dead` (queueType 'quorum') and quarantines every message there with its
 * exact body, properties and headers (the broker's x-death included), then acks it. The body is
 * never parsed: a message that died from crashing the consumer must not crash it again here.
 *
 * It never returns a dead message with a nack: the dead queue has nowhere further to send it, so
 * its delivery count must not grow. When the quarantine row cannot be written (database down),
 * it holds the message and tries again after a growing backoff; closing leaves it unacked, and
 * the broker keeps it for the next session.
 */
export class DeadLetterIntake {
  readonly #scope: DeadLetterScope;
  readonly #settler: Settler;
  readonly #idle = new Idle();
  #subscription: Subscription | undefined;
  #closing = false;
  #queue: Promise<void> = Promise.resolve();

  private constructor(scope: DeadLetterScope) {
    this.#scope = scope;
    this.#settler = new Settler({ ...scope, schema: scope.schemaRef });
  }

  static async open(
    connection: TransportConnection,
    deadQueue: string,
    options: DeadLetterOptions,
    pool: pg.Pool,
    hooks: DeadLetterHooks,
  ): Promise<DeadLetterIntake> {
    const { schema, consumer, backoff, logger } = options;
    const scope = { schema, consumer, backoff, logger, ...hooks, deadQueue, pool, schemaRef: schemaRef(schema) };
    const intake = new DeadLetterIntake(scope);
    intake.#subscription = await connection.subscribe(scope.deadQueue, (message) => intake.#received(message), {
      prefetch: DEAD_LETTER_PREFETCH,
      // The broker cancelled the subscription (dead queue deleted, or moved on a cluster), or its channel closed.
      onCancelled: () => {
        if (!intake.#closing)
          scope.logger.warn({ queue: scope.deadQueue }, 'dead-letter subscription cancelled by the broker');
        intake.#lost();
      },
    });
    return intake;
  }

  /**
   * Stops taking dead messages, ends a backoff in progress, lets a write in progress finish. What
   * it still holds unacked goes back to the dead queue when the session's connection closes.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#idle.close();
    await this.#subscription?.cancel();
    await this.#queue;
  }

  #lost(): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#idle.close();
    this.#scope.onLost();
  }

  #received(message: TransportDelivery): void {
    // One at a time, in arrival order: they all wait on the same database.
    this.#queue = this.#queue.then(() => this.#quarantine(message));
  }

  async #quarantine(message: TransportDelivery): Promise<void> {
    trustHeaders(message, this.#scope.headerKey.loaded);
    const verdict = deadLetterVerdict(
      lastDeath(message.properties.headers),
      this.#scope.deadQueue,
      message.properties.undecodableHeaders,
    );
    for (let failures = 1; !this.#closing; failures++) {
      const settlement = await this.#settler.quarantine({
        delivery: message,
        eventId: messageIdOf(message),
        print: null,
        ...verdict,
      });
      if (settlement.action === 'ack' && settlement.outcome === 'quarantined') {
        // On a connection closed after the row committed this is a no-op: the broker redelivers, the open row counts it again.
        message.ack();
        this.#scope.onQuarantined(settlement);
        return;
      }
      const delayMs = backoffDelay(failures, this.#scope.backoff);
      this.#scope.logger.warn(
        { queue: this.#scope.deadQueue, delayMs, failures },
        'dead message kept unacknowledged until its quarantine row can be written',
      );
      await this.#idle.backoff(delayMs);
    }
  }
}
