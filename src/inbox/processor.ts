import type pg from 'pg';
import { quoteIdentifier } from '../db/identifier.js';
import { leasePool } from '../db/pool.js';
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
import { resolveProcessorOptions, type EventHandler, type ProcessorOptions, type ResolvedProcessorOptions } from './options.js';
import { quarantine, type QuarantineEntry, type QuarantineReason, type RawDelivery } from './quarantine.js';


/**
 * What the transport must do with a delivery once processing returned. `ack` comes only
 * after the local transaction committed (or after the quarantine row committed).
 */
export type Settlement =
  | { action: 'ack'; outcome: 'applied' | 'duplicate' | 'ignored'; eventId: string }
  | { action: 'ack'; outcome: 'quarantined'; reason: QuarantineReason; eventId: string | null; quarantineId: string; conflict?: ContentConflictError }
  | { action: 'retry'; delayMs: number; attempt: number; reason: string; eventId: string | null };

interface Candidate {
  index: number;
  delivery: RawDelivery;
  envelope: EventEnvelope;
  print: string;
  attempt: number;
}

type BatchOutcome = Map<string, Settlement>;

/**
 * Turns deliveries into local transactions: validate, insert the inbox rows, run the
 * handlers, commit, and tell the transport how to settle each delivery. A batch shares one
 * transaction; if anything in it fails, every delivery of the batch is processed again on
 * its own, so each keeps its own outcome (applied, duplicate, conflict, gap, quarantine).
 * It never talks to the broker, so the same code serves the subscription loop and a
 * basic.get loop alike.
 */
export class DeliveryProcessor {
  readonly options: ResolvedProcessorOptions;
  readonly #pool: pg.Pool;
  readonly #releasePool: () => Promise<void>;
  readonly #schema: string;

  constructor(options: ProcessorOptions) {
    this.options = resolveProcessorOptions(options);
    this.#schema = quoteIdentifier(this.options.schema);
    const lease = leasePool(this.options.pool, { connectionString: this.options.connectionString, max: 4, applicationName: 'converge-consumer', logger: this.options.logger });
    this.#pool = lease.pool;
    this.#releasePool = lease.release;
  }

  async process(delivery: RawDelivery): Promise<Settlement> {
    const [settlement] = await this.processBatch([delivery]);
    return settlement!;
  }

  /** Settlements in the order of `deliveries`. */
  async processBatch(deliveries: readonly RawDelivery[]): Promise<Settlement[]> {
    const settlements: Settlement[] = new Array(deliveries.length);
    const candidates: Candidate[] = [];
    const later: Candidate[] = [];
    const ids = new Set<string>();
    for (const [index, delivery] of deliveries.entries()) {
      const attempt = readAttempt(delivery);
      let envelope: EventEnvelope;
      try {
        envelope = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
      } catch (err) {
        settlements[index] = await this.#settleFailure(err, delivery, null, null, attempt);
        continue;
      }
      const print = fingerprint(envelope);
      if (!this.options.batchHandler && !this.#handlerFor(envelope)) {
        settlements[index] = await this.#settleUnknownType(delivery, envelope, print);
        continue;
      }
      // A second copy of an event inside one batch is judged after the first has committed.
      (ids.has(envelope.eventId) ? later : candidates).push({ index, delivery, envelope, print, attempt });
      ids.add(envelope.eventId);
    }
    for (const [index, settlement] of (await this.#processCandidates(candidates)).entries()) settlements[index] = settlement;
    for (const candidate of later) settlements[candidate.index] = (await this.#processCandidates([candidate])).get(candidate.index)!;
    return settlements;
  }

  async #processCandidates(candidates: Candidate[]): Promise<Map<number, Settlement>> {
    const settled = new Map<number, Settlement>();
    if (candidates.length === 0) return settled;
    // Version order per aggregate, so E1 and E2 arriving in one batch as E2, E1 both apply.
    const ordered = [...candidates].sort(byAggregateVersion);
    try {
      const outcome = await withTransaction(this.#pool, (tx) => this.#applyInTransaction(tx, ordered));
      for (const candidate of ordered) settled.set(candidate.index, outcome.get(candidate.envelope.eventId)!);
      return settled;
    } catch (err) {
      if (ordered.length === 1) {
        const [only] = ordered;
        settled.set(only!.index, await this.#settleFailure(err, only!.delivery, only!.envelope, only!.print, only!.attempt));
        return settled;
      }
      this.options.logger.debug({ size: ordered.length, ...describeError(err) }, 'batch rolled back; processing its deliveries one by one');
      for (const candidate of ordered) settled.set(candidate.index, (await this.#processCandidates([candidate])).get(candidate.index)!);
      return settled;
    }
  }

  async #applyInTransaction(tx: pg.PoolClient, ordered: Candidate[]): Promise<BatchOutcome> {
    const outcome: BatchOutcome = new Map();
    const statuses = await recordInInbox(tx, this.#schema, this.options.consumer, ordered.map((c) => ({ envelope: c.envelope, fingerprint: c.print })));
    const fresh: Candidate[] = [];
    for (const candidate of ordered) {
      const status = statuses.get(candidate.envelope.eventId)!;
      const eventId = candidate.envelope.eventId;
      if (status.status === 'new') fresh.push(candidate);
      else if (status.status === 'duplicate') outcome.set(eventId, { action: 'ack', outcome: 'duplicate', eventId });
      else {
        // Recorded on the same transaction: the ack follows only once the quarantine row is durable.
        const quarantineId = await quarantine(tx, this.#schema, this.#quarantineEntry(candidate.delivery, eventId, candidate.print, 'content-conflict', status.conflict.message));
        this.options.logger.error({ eventId, reason: 'content-conflict', quarantineId }, 'delivery quarantined for a person to inspect');
        outcome.set(eventId, { action: 'ack', outcome: 'quarantined', reason: 'content-conflict', eventId, quarantineId, conflict: status.conflict });
      }
    }
    if (fresh.length > 0) await this.#runHandlers(tx, fresh);
    for (const { envelope } of fresh) outcome.set(envelope.eventId, { action: 'ack', outcome: 'applied', eventId: envelope.eventId });
    return outcome;
  }

  async #runHandlers(tx: pg.PoolClient, fresh: Candidate[]): Promise<void> {
    const context = (attempt: number, redelivered: boolean) => ({ tx, consumer: this.options.consumer, schema: this.options.schema, attempt, redelivered });
    if (this.options.batchHandler) {
      const attempt = Math.max(...fresh.map((c) => c.attempt));
      const redelivered = fresh.some((c) => c.delivery.fields.redelivered ?? false);
      await this.options.batchHandler(fresh.map((c) => c.envelope), context(attempt, redelivered));
      return;
    }
    for (const candidate of fresh) {
      await this.#handlerFor(candidate.envelope)!(candidate.envelope, context(candidate.attempt, candidate.delivery.fields.redelivered ?? false));
    }
  }

  #handlerFor(envelope: EventEnvelope): EventHandler | undefined {
    return this.options.handlers[envelope.eventType] ?? this.options.handlers['*'];
  }

  async #settleUnknownType(delivery: RawDelivery, envelope: EventEnvelope, print: string): Promise<Settlement> {
    if (this.options.unknownEventType === 'ignore') return { action: 'ack', outcome: 'ignored', eventId: envelope.eventId };
    return this.#quarantine(delivery, envelope.eventId, print, 'unknown-event-type', `no handler for eventType ${envelope.eventType}`);
  }

  async close(): Promise<void> {
    await this.#releasePool();
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
    try {
      const quarantineId = await quarantine(this.#pool, this.#schema, this.#quarantineEntry(delivery, eventId, print, reason, detail));
      this.options.logger.error({ eventId, reason, quarantineId }, 'delivery quarantined for a person to inspect');
      return { action: 'ack', outcome: 'quarantined', reason, eventId, quarantineId };
    } catch (err) {
      // Without a durable quarantine row the delivery must not be acked: let it come back.
      const attempt = readAttempt(delivery);
      const delayMs = backoffDelay(attempt, this.options.backoff);
      this.options.logger.warn({ eventId, reason, ...describeError(err) }, 'could not write quarantine row; retrying delivery');
      return { action: 'retry', delayMs, attempt, reason: 'quarantine-unavailable', eventId };
    }
  }

  #quarantineEntry(delivery: RawDelivery, eventId: string | null, print: string | null, reason: QuarantineReason, detail: string): QuarantineEntry {
    return { consumer: this.options.consumer, eventId, reason, detail, fingerprint: print, delivery };
  }
}

export function createDeliveryProcessor(options: ProcessorOptions): DeliveryProcessor {
  return new DeliveryProcessor(options);
}

function byAggregateVersion(a: Candidate, b: Candidate): number {
  const x = a.envelope;
  const y = b.envelope;
  if (x.aggregateType !== y.aggregateType) return x.aggregateType < y.aggregateType ? -1 : 1;
  if (x.aggregateId !== y.aggregateId) return x.aggregateId < y.aggregateId ? -1 : 1;
  return x.aggregateVersion - y.aggregateVersion || a.index - b.index;
}

function readAttempt(delivery: RawDelivery): number {
  const previous = Number(delivery.properties.headers?.[ATTEMPT_HEADER] ?? 0);
  return Number.isInteger(previous) && previous >= 0 ? previous + 1 : 1;
}
