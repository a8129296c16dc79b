import type pg from 'pg';
import { withTransaction } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { backoffDelay, type BackoffPolicy } from '../runtime/backoff.js';
import type { ContentConflictError } from '../runtime/errors.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { readAttempt, readReplayOf, traceFields } from './headers.js';
import { unpark } from './parking.js';
import { quarantine, type QuarantineEntry } from './quarantine.js';
import { recordReplayOutcomes } from './replay.js';
import type { QuarantineReason, RawDelivery, RetrySettlement, Settlement } from './types.js';
import { readInboxWatermark } from './watermark.js';

export interface SettlerScope {
  pool: pg.Pool;
  schema: SchemaRef;
  consumer: string;
  backoff: BackoffPolicy;
  logger: Logger;
}

/** What a quarantine row records about one delivery. */
export interface QuarantineRequest {
  delivery: RawDelivery;
  eventId: string | null;
  print: string | null;
  reason: QuarantineReason;
  detail: string;
  /** The event comes from the reorder buffer and leaves it with the quarantine row. */
  parked?: boolean;
  /** The conflict behind a `content-conflict`, reported to the consumer's `conflict` listeners. */
  conflict?: ContentConflictError;
}

/**
 * The settlements that need their own small transaction or a read outside the consumer
 * transaction: quarantine rows, the compaction check, bookkeeping of ignored replays; and
 * retries after the backoff.
 */
export class Settler {
  readonly #scope: SettlerScope;

  constructor(scope: SettlerScope) {
    this.#scope = scope;
  }

  /** A retry through the broker after this attempt's backoff. */
  retryLater(attempt: number, reason: string, eventId: string | null): RetrySettlement {
    return { action: 'retry', delayMs: backoffDelay(attempt, this.#scope.backoff), attempt, reason, eventId };
  }

  /** Writes the quarantine row (acked once durable); without a durable row the delivery must come back. */
  async quarantine(request: QuarantineRequest): Promise<Settlement> {
    const { delivery, eventId, reason } = request;
    const { pool, schema, consumer, logger } = this.#scope;
    try {
      const quarantineId = await withTransaction(pool, async (tx) => {
        const id = await quarantine(tx, schema, entryOf(consumer, request));
        if (request.parked && eventId !== null) await unpark(tx, schema, consumer, [eventId]);
        // A replay that fails again links its original row to the new open one.
        await recordReplayOutcomes(tx, schema, [
          { delivery, outcome: reason === 'content-conflict' ? 'conflict' : 'quarantined', quarantineId: id },
        ]);
        return id;
      });
      logger.error(
        { eventId, ...traceFields(delivery), reason, quarantineId },
        'delivery quarantined for a person to inspect',
      );
      return quarantined(reason, eventId, quarantineId, request.conflict);
    } catch (err) {
      const retry = this.retryLater(readAttempt(delivery), 'quarantine-unavailable', eventId);
      logger.warn(
        { eventId, ...traceFields(delivery), reason, ...describeError(err) },
        'could not write quarantine row; retrying delivery',
      );
      return retry;
    }
  }

  /**
   * A delivery whose retry copy amqplib refused to encode (`error`): every copy would be refused
   * alike, and requeueing it would bring it back for ever without counting an attempt, so it is
   * quarantined (`unencodable-copy`) with the property amqplib named. A parked event leaves the
   * reorder buffer with its row.
   */
  uncopyable(delivery: RawDelivery, settlement: RetrySettlement, error: Error, parked = false): Promise<Settlement> {
    return this.quarantine({
      delivery,
      eventId: settlement.eventId,
      print: null,
      reason: 'unencodable-copy',
      detail: `attempt ${settlement.attempt} (${settlement.reason}) could not be retried: ${error.message}`,
      parked,
    });
  }

  /**
   * A stale version at or below the aggregate's compaction watermark is a copy of an event
   * that was applied and whose inbox row was compacted away: done, without effect. Only this
   * failure path reads the watermark, so the hot path pays nothing for compaction.
   * Limit: the fingerprint went with the inbox row, so a copy with the same eventId and other
   * content (or another event claiming a compacted version) is acked the same way instead of
   * quarantined; that is why compaction's window must exceed the retry horizon and the
   * quarantine replay window. Null: not compacted, the old rules apply.
   */
  async ifCompacted(envelope: EventEnvelope, attempt: number, parked: boolean): Promise<Settlement | null> {
    const { pool, schema, consumer, logger } = this.#scope;
    const eventId = envelope.eventId;
    try {
      const watermark = await readInboxWatermark(pool, schema, consumer, envelope);
      if (watermark === null || watermark < envelope.aggregateVersion) return null;
      if (parked) await unpark(pool, schema, consumer, [eventId]);
    } catch (err) {
      const retry = this.retryLater(attempt, 'database-unavailable', eventId);
      logger.warn(
        { eventId, attempt, delayMs: retry.delayMs, ...describeError(err) },
        'could not read the compaction watermark; it will be retried',
      );
      return retry;
    }
    logger.debug({ eventId }, 'compacted event seen again; acknowledged without effect');
    return { action: 'ack', outcome: 'duplicate', eventId };
  }

  /**
   * An ignored event writes nothing, so there is no transaction to join. The record is
   * bookkeeping for a person: failing to write it must not hold the delivery back.
   */
  async ignored(delivery: RawDelivery, eventId: string): Promise<Settlement> {
    if (readReplayOf(delivery) !== null) {
      try {
        await recordReplayOutcomes(this.#scope.pool, this.#scope.schema, [{ delivery, outcome: 'ignored' }]);
      } catch (err) {
        this.#scope.logger.warn(
          { eventId, ...traceFields(delivery), replayOf: readReplayOf(delivery)?.id, ...describeError(err) },
          'could not record the outcome of a replayed message',
        );
      }
    }
    return { action: 'ack', outcome: 'ignored', eventId };
  }
}

export function quarantined(
  reason: QuarantineReason,
  eventId: string | null,
  quarantineId: string,
  conflict?: ContentConflictError,
): Settlement {
  return conflict
    ? { action: 'ack', outcome: 'quarantined', reason, eventId, quarantineId, conflict }
    : { action: 'ack', outcome: 'quarantined', reason, eventId, quarantineId };
}

function entryOf(consumer: string, request: QuarantineRequest): QuarantineEntry {
  return {
    consumer,
    eventId: request.eventId,
    reason: request.reason,
    detail: request.detail,
    fingerprint: request.print,
    delivery: request.delivery,
  };
}
