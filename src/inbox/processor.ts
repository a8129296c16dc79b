import pg from 'pg';
import { quoteIdentifier } from '../db/identifier.js';
import { withTransaction } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { fingerprint } from '../envelope/fingerprint.js';
import { parseEnvelope } from '../envelope/validate.js';
import { ContentConflictError, ConvergeError } from '../errors.js';
import { backoffDelay } from '../ops/backoff.js';
import { describeError } from '../ops/logger.js';
import { classifyFailure } from './classify.js';
import { ATTEMPT_HEADER } from './headers.js';
import { recordInInbox } from './inbox.js';
import { resolveProcessorOptions, type ProcessorOptions, type ResolvedProcessorOptions } from './options.js';
import { quarantine, type QuarantineReason, type RawDelivery } from './quarantine.js';


/**
 * What the transport must do with a delivery once processing returned. `ack` comes only
 * after the local transaction committed (or after the quarantine row committed).
 */
export type Settlement =
  | { action: 'ack'; outcome: 'applied' | 'duplicate' | 'ignored'; eventId: string }
  | { action: 'ack'; outcome: 'quarantined'; reason: QuarantineReason; eventId: string | null; quarantineId: string; conflict?: ContentConflictError }
  | { action: 'retry'; delayMs: number; attempt: number; reason: string; eventId: string | null };

/**
 * Turns one delivery into one local transaction: validate, insert the inbox row, run the
 * handler, commit, and tell the transport how to settle. It never talks to the broker, so
 * the same code serves the subscription loop, a basic.get loop and (later) batches.
 */
export class DeliveryProcessor {
  readonly options: ResolvedProcessorOptions;
  readonly #pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #schema: string;

  constructor(options: ProcessorOptions) {
    this.options = resolveProcessorOptions(options);
    this.#schema = quoteIdentifier(this.options.schema);
    this.#ownsPool = !this.options.pool;
    this.#pool = this.options.pool ?? new pg.Pool({ connectionString: this.options.connectionString, max: 4, application_name: 'converge-consumer' });
    if (this.#ownsPool) this.#pool.on('error', (err) => this.options.logger.warn(describeError(err), 'idle database connection lost'));
  }

  async process(delivery: RawDelivery): Promise<Settlement> {
    const attempt = readAttempt(delivery);
    let envelope: EventEnvelope;
    try {
      envelope = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
    } catch (err) {
      return this.#settleFailure(err, delivery, null, null, attempt);
    }
    const handler = this.options.handlers[envelope.eventType] ?? this.options.handlers['*'];
    const print = fingerprint(envelope);
    if (!handler) {
      if (this.options.unknownEventType === 'ignore') return { action: 'ack', outcome: 'ignored', eventId: envelope.eventId };
      const detail = `no handler for eventType ${envelope.eventType}`;
      return this.#quarantine(delivery, envelope.eventId, print, 'unknown-event-type', detail);
    }
    try {
      const outcome = await withTransaction(this.#pool, async (tx) => {
        const status = await recordInInbox(tx, this.#schema, this.options.consumer, envelope, print);
        if (status === 'duplicate') return 'duplicate' as const;
        await handler(envelope, {
          tx,
          consumer: this.options.consumer,
          schema: this.options.schema,
          attempt,
          redelivered: delivery.fields.redelivered ?? false,
        });
        return 'applied' as const;
      });
      return { action: 'ack', outcome, eventId: envelope.eventId };
    } catch (err) {
      return this.#settleFailure(err, delivery, envelope, print, attempt);
    }
  }

  async close(): Promise<void> {
    if (this.#ownsPool) await this.#pool.end();
  }

  async #settleFailure(err: unknown, delivery: RawDelivery, envelope: EventEnvelope | null, print: string | null, attempt: number): Promise<Settlement> {
    const eventId = envelope?.eventId ?? null;
    const verdict = classifyFailure(err, attempt, this.options.maxAttempts);
    if (verdict.action === 'quarantine') {
      // The quarantine row sits next to the raw body, so the handler's full message may go there (never into logs).
      const detail = err instanceof ConvergeError ? err.message : `handler failed after ${attempt} attempts: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
      const settlement = await this.#quarantine(delivery, eventId, print, verdict.reason, detail);
      if (settlement.action === 'ack' && settlement.outcome === 'quarantined' && err instanceof ContentConflictError) settlement.conflict = err;
      return settlement;
    }
    const delayMs = backoffDelay(attempt, this.options.backoff);
    this.options.logger.warn({ eventId, attempt, delayMs, reason: verdict.reason, ...describeError(err) }, 'delivery rolled back; it will be retried');
    return { action: 'retry', delayMs, attempt, reason: verdict.reason, eventId };
  }

  async #quarantine(delivery: RawDelivery, eventId: string | null, print: string | null, reason: QuarantineReason, detail: string): Promise<Settlement> {
    const attempt = readAttempt(delivery);
    try {
      const quarantineId = await quarantine(this.#pool, this.#schema, { consumer: this.options.consumer, eventId, reason, detail, fingerprint: print, delivery });
      this.options.logger.error({ eventId, reason, quarantineId }, 'delivery quarantined for a person to inspect');
      return { action: 'ack', outcome: 'quarantined', reason, eventId, quarantineId };
    } catch (err) {
      // Without a durable quarantine row the delivery must not be acked: let it come back.
      const delayMs = backoffDelay(attempt, this.options.backoff);
      this.options.logger.warn({ eventId, reason, ...describeError(err) }, 'could not write quarantine row; retrying delivery');
      return { action: 'retry', delayMs, attempt, reason: 'quarantine-unavailable', eventId };
    }
  }
}

export function createDeliveryProcessor(options: ProcessorOptions): DeliveryProcessor {
  return new DeliveryProcessor(options);
}

function readAttempt(delivery: RawDelivery): number {
  const previous = Number(delivery.properties.headers?.[ATTEMPT_HEADER] ?? 0);
  return Number.isInteger(previous) && previous >= 0 ? previous + 1 : 1;
}
