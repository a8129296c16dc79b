import type pg from 'pg';
import { quoteIdentifier } from '../runtime/identifier.js';
import { leasePool } from '../db/pool.js';
import { withTransaction } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { fingerprint } from '../envelope/fingerprint.js';
import { parseEnvelope } from '../envelope/validate.js';
import { ContentConflictError, ConvergeError, StaleVersionError, VersionGapError } from '../runtime/errors.js';
import { backoffDelay } from '../runtime/backoff.js';
import { describeError } from '../runtime/logger.js';
import { classifyFailure } from './classify.js';
import { upcast } from './upcast.js';
import { readAttempt, readReplayOf, traceFields } from './headers.js';
import { recordInInbox } from './inbox.js';
import { resolveProcessorOptions, type ProcessorOptions, type ResolvedProcessorOptions } from './options.js';
import type { EventHandler } from './handler.js';
import { aggregatesReady, aggregatesToDrain, loadParked, parkEvent, readGaps, unpark, type AggregateRef, type Gap, type ParkResult } from './parking.js';
import { aggregateKey, readProjectionState } from '../projection/index.js';
import { repairFromSnapshot } from '../reconcile/index.js';
import { quarantine, type QuarantineEntry, type QuarantineReason, type RawDelivery } from './quarantine.js';
import { readInboxWatermark } from './watermark.js';
import { recordReplayOutcomes, type ReplayRecord } from './replay.js';


/**
 * What the transport must do with a delivery once processing returned. `ack` comes only
 * after the local transaction committed (or after the quarantine row committed).
 */
export type Settlement =
  | { action: 'ack'; outcome: 'duplicate' | 'ignored'; eventId: string }
  /** `occurredAt` comes from the event, for the end-to-end lag (occurredAt → commit). */
  | { action: 'ack'; outcome: 'applied'; eventId: string; occurredAt: string }
  /** Arrived before its predecessor: kept in the reorder buffer (committed), applied once the predecessor is. */
  | { action: 'ack'; outcome: 'parked'; eventId: string }
  | { action: 'ack'; outcome: 'quarantined'; reason: QuarantineReason; eventId: string | null; quarantineId: string; conflict?: ContentConflictError }
  | { action: 'retry'; delayMs: number; attempt: number; reason: string; eventId: string | null };

interface Candidate {
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

/** Parked events that were applied or failed after their predecessor arrived. Default: nothing. */
export type DrainListener = (drained: DrainedEvent[]) => Promise<void> | void;

/** What the source of truth says about one aggregate, read consistently (one snapshot). */
export interface SourceSnapshot {
  version: number;
  /** The source says the aggregate is gone: the repair writes a versioned tombstone. */
  deleted?: boolean;
}

export interface GapRepairOptions<S extends SourceSnapshot> {
  /** Only gaps open at least this long. Default 0. */
  olderThanMs?: number;
  /** Most gaps repaired in one call, oldest first. Default 100. */
  limit?: number;
  /**
   * Reads the aggregate from the source. Return null if the source cannot say (nothing is
   * written then: a deletion is never inferred from absence); return `deleted: true` for a
   * known deletion.
   */
  loadSnapshot: (gap: Gap) => Promise<S | null>;
  /** Writes the read model from the snapshot, on the repair's transaction; runs only if the repair wins. */
  apply: (tx: pg.PoolClient, snapshot: S, gap: Gap) => Promise<void>;
}

export interface GapRepairReport {
  gaps: number;
  /** Projection moved to the source's version (baseline watermark set). */
  repaired: number;
  /** The projection already had the source's version or a later one. */
  notNewer: number;
  /** loadSnapshot returned null; the gap stays. */
  unknownAtSource: number;
  /** Parked events applied (or recorded as covered by the baseline) after the repairs. */
  drained: number;
}

/** Parked events of one aggregate taken per drain transaction. */
const DRAIN_BATCH = 256;

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
  #onDrained: DrainListener = () => undefined;

  constructor(options: ProcessorOptions | ResolvedProcessorOptions) {
    this.options = resolveProcessorOptions(options);
    this.#schema = quoteIdentifier(this.options.schema);
    const lease = leasePool(this.options.pool, { connectionString: this.options.connectionString, max: 4, applicationName: 'converge-consumer', logger: this.options.logger });
    this.#pool = lease.pool;
    this.#releasePool = lease.release;
  }

  /**
   * Parses, fingerprints the event as it was sent (duplicates and conflicts compare what the
   * producer wrote, whatever this consumer's schema), then upcasts it to the current shape.
   */
  #prepare(delivery: RawDelivery): { envelope: EventEnvelope; print: string } {
    const sent = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
    return { envelope: upcast(sent, this.options.schemas), print: fingerprint(sent) };
  }

  /**
   * #prepare for a fresh delivery, settling it when that fails. A valid envelope that cannot
   * be upcast (a newer schema version) keeps its eventId and fingerprint in the quarantine
   * row, so `dlq list` and a replay can name the event.
   */
  async #prepareOrSettle(delivery: RawDelivery, attempt: number): Promise<{ envelope: EventEnvelope; print: string } | { settlement: Settlement }> {
    let sent: EventEnvelope | null = null;
    let print: string | null = null;
    try {
      sent = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
      print = fingerprint(sent);
      return { envelope: upcast(sent, this.options.schemas), print };
    } catch (err) {
      return { settlement: await this.#settleFailure(err, delivery, sent, print, attempt) };
    }
  }

  /** The pool it runs on, for read-only companions such as the consumer's metrics gauges. */
  get pool(): pg.Pool {
    return this.#pool;
  }

  /** Where drained parked events are reported (the consumer re-queues the ones that must be retried). */
  onDrained(listener: DrainListener): void {
    this.#onDrained = listener;
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
      const prepared = await this.#prepareOrSettle(delivery, attempt);
      if ('settlement' in prepared) {
        settlements[index] = prepared.settlement;
        continue;
      }
      const { envelope, print } = prepared;
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
    await this.#drainAfter([...candidates, ...later].filter((c) => isApplied(settlements[c.index])));
    return settlements;
  }

  /**
   * Committed events may have made parked successors applicable: drain them now, in the
   * same consumer flow, each with its inbox row. One indexed query per batch when nothing is parked.
   */
  async #drainAfter(applied: Candidate[]): Promise<void> {
    if (!this.options.reorderBuffer || applied.length === 0) return;
    const reached = new Map<string, AggregateRef & { version: number }>();
    for (const { envelope } of applied) {
      const key = aggregateKey(envelope);
      const version = Math.max(reached.get(key)?.version ?? 0, envelope.aggregateVersion);
      reached.set(key, { aggregateType: envelope.aggregateType, aggregateId: envelope.aggregateId, version });
    }
    for (const aggregate of await aggregatesToDrain(this.#pool, this.#schema, this.options.consumer, [...reached.values()])) await this.#drainAggregate(aggregate);
  }

  /**
   * Repairs aggregates stuck on a missing version from the source: a conditional snapshot
   * write that sets the baseline watermark (never regressing what a live consumer wrote
   * meanwhile: on a lost race it re-reads and compares again), then drains the parked
   * events. Those at or below the baseline are recorded in the inbox without effect; the
   * ones above apply in order. Late copies of covered events are acked as done when they arrive.
   */
  async repairGaps<S extends SourceSnapshot>(options: GapRepairOptions<S>): Promise<GapRepairReport> {
    const gaps = await readGaps(this.#pool, { schema: this.options.schema, consumer: this.options.consumer, olderThanMs: options.olderThanMs ?? 0, limit: options.limit ?? 100 });
    const report: GapRepairReport = { gaps: gaps.length, repaired: 0, notNewer: 0, unknownAtSource: 0, drained: 0 };
    for (const gap of gaps) {
      const snapshot = await options.loadSnapshot(gap);
      if (snapshot === null) {
        report.unknownAtSource++;
        continue;
      }
      const outcome = await this.#repairOne(gap, snapshot, options.apply);
      report[outcome]++;
      this.options.logger.info({ aggregateType: gap.aggregateType, aggregateId: gap.aggregateId, projection: gap.projection, sourceVersion: snapshot.version, outcome }, 'gap repair');
      report.drained += await this.#drainAggregate(gap);
    }
    return report;
  }

  async #repairOne<S extends SourceSnapshot>(gap: Gap, snapshot: S, apply: GapRepairOptions<S>['apply']): Promise<'repaired' | 'notNewer'> {
    for (;;) {
      const result = await withTransaction(this.#pool, async (tx) => {
        const state = await readProjectionState(tx, { projection: gap.projection, aggregateType: gap.aggregateType, aggregateId: gap.aggregateId, schema: this.options.schema });
        return repairFromSnapshot(
          tx,
          { projection: gap.projection, aggregateType: gap.aggregateType, aggregateId: gap.aggregateId, sourceVersion: snapshot.version, deleted: snapshot.deleted ?? false, observedVersion: state?.version ?? null, schema: this.options.schema },
          () => apply(tx, snapshot, gap),
        );
      });
      if (result.repaired) return 'repaired';
      if (result.reason === 'not-newer') return 'notNewer';
      // stale-observation: the live consumer moved the aggregate since it was read; compare again.
    }
  }

  /** Applies the parked events of one aggregate for as long as that makes progress; returns how many left the buffer. */
  async #drainAggregate(aggregate: AggregateRef): Promise<number> {
    let left = 0;
    for (;;) {
      const parked = await loadParked(this.#pool, this.#schema, this.options.consumer, aggregate, DRAIN_BATCH);
      const candidates: Candidate[] = [];
      for (const [index, { delivery }] of parked.entries()) {
        // It was parsed (and upcast) before it was parked; the same rules apply again.
        const { envelope, print } = this.#prepare(delivery);
        candidates.push({ index, delivery, envelope, print, attempt: readAttempt(delivery), parked: true });
      }
      if (candidates.length === 0) return left;
      const settled = await this.#processCandidates(candidates);
      const drained = candidates.map((c) => ({ delivery: c.delivery, settlement: settled.get(c.index)! }));
      const done = drained.filter((d) => !isStillParked(d.settlement));
      await this.#onDrained(done);
      left += done.filter((d) => d.settlement.action === 'ack').length;
      if (drained.every((d) => isStillParked(d.settlement) || d.settlement.action === 'retry')) return left;
    }
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
        settled.set(only!.index, await this.#settleFailure(err, only!.delivery, only!.envelope, only!.print, only!.attempt, only!.parked ?? false));
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
        this.options.logger.error({ eventId, ...traceFields(candidate.delivery, candidate.envelope), reason: 'content-conflict', quarantineId }, 'delivery quarantined for a person to inspect');
        outcome.set(eventId, { action: 'ack', outcome: 'quarantined', reason: 'content-conflict', eventId, quarantineId, conflict: status.conflict });
      }
    }
    if (fresh.length > 0) await this.#runHandlers(tx, fresh);
    for (const { envelope } of fresh) outcome.set(envelope.eventId, { action: 'ack', outcome: 'applied', eventId: envelope.eventId, occurredAt: envelope.occurredAt });
    await unpark(tx, this.#schema, this.options.consumer, ordered.filter((c) => c.parked).map((c) => c.envelope.eventId));
    // Same transaction as the inbox rows: the recorded outcome commits (or rolls back) with them.
    const replayed = ordered.filter((c) => readReplayOf(c.delivery) !== null);
    if (replayed.length > 0) await recordReplayOutcomes(tx, this.#schema, replayed.flatMap((c) => replayRecord(c.delivery, outcome.get(c.envelope.eventId)!) ?? []));
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
    if (this.options.unknownEventType === 'ignore') {
      await this.#recordIgnoredReplay(delivery, envelope.eventId);
      return { action: 'ack', outcome: 'ignored', eventId: envelope.eventId };
    }
    return this.#quarantine(delivery, envelope.eventId, print, 'unknown-event-type', `no handler for eventType ${envelope.eventType}`);
  }

  /**
   * An ignored event writes nothing, so there is no transaction to join. The record is
   * bookkeeping for a person: failing to write it must not hold the delivery back.
   */
  async #recordIgnoredReplay(delivery: RawDelivery, eventId: string): Promise<void> {
    if (readReplayOf(delivery) === null) return;
    try {
      await recordReplayOutcomes(this.#pool, this.#schema, [{ delivery, outcome: 'ignored' }]);
    } catch (err) {
      this.options.logger.warn({ eventId, ...traceFields(delivery), replayOf: readReplayOf(delivery), ...describeError(err) }, 'could not record the outcome of a replayed message');
    }
  }

  async close(): Promise<void> {
    await this.#releasePool();
  }

  async #settleFailure(err: unknown, delivery: RawDelivery, envelope: EventEnvelope | null, print: string | null, attempt: number, parked = false): Promise<Settlement> {
    const eventId = envelope?.eventId ?? null;
    if (err instanceof VersionGapError && envelope && print && this.options.reorderBuffer && envelope.kind === 'incremental') {
      // A parked event that still has a gap stays where it is.
      if (parked) return { action: 'ack', outcome: 'parked', eventId: envelope.eventId };
      return this.#park(err, delivery, envelope, print, attempt);
    }
    if (err instanceof StaleVersionError && envelope && isAbout(err, envelope)) {
      const compacted = await this.#settleIfCompacted(envelope, attempt, parked);
      if (compacted) return compacted;
    }
    const verdict = classifyFailure(err, attempt, this.options.maxAttempts);
    if (verdict.action === 'quarantine') {
      // The quarantine row sits next to the raw body, so the handler's full message may go there (never into logs).
      const detail = err instanceof ConvergeError ? err.message : `handler failed after ${attempt} attempts: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
      const settlement = await this.#quarantine(delivery, eventId, print, verdict.reason, detail, parked);
      if (settlement.action === 'ack' && settlement.outcome === 'quarantined' && err instanceof ContentConflictError) settlement.conflict = err;
      return settlement;
    }
    const retry = this.#retryLater(attempt, verdict.reason, eventId);
    this.options.logger.warn({ eventId, ...traceFields(delivery, envelope), attempt, delayMs: retry.delayMs, reason: verdict.reason, ...describeError(err) }, 'delivery rolled back; it will be retried');
    return retry;
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
  async #settleIfCompacted(envelope: EventEnvelope, attempt: number, parked: boolean): Promise<Settlement | null> {
    const eventId = envelope.eventId;
    try {
      const watermark = await readInboxWatermark(this.#pool, this.#schema, this.options.consumer, envelope);
      if (watermark === null || watermark < envelope.aggregateVersion) return null;
      if (parked) await unpark(this.#pool, this.#schema, this.options.consumer, [eventId]);
    } catch (err) {
      const retry = this.#retryLater(attempt, 'database-unavailable', eventId);
      this.options.logger.warn({ eventId, attempt, delayMs: retry.delayMs, ...describeError(err) }, 'could not read the compaction watermark; it will be retried');
      return retry;
    }
    this.options.logger.debug({ eventId }, 'compacted event seen again; acknowledged without effect');
    return { action: 'ack', outcome: 'duplicate', eventId };
  }

  /** A retry through the broker after this attempt's backoff. */
  #retryLater(attempt: number, reason: string, eventId: string | null): Extract<Settlement, { action: 'retry' }> {
    return { action: 'retry', delayMs: backoffDelay(attempt, this.options.backoff), attempt, reason, eventId };
  }

  /**
   * Parks an early incremental event (committed before the delivery is acked), then looks
   * once more at the projection: if the predecessor committed meanwhile, its own drain check
   * may have run before this row existed, so this side drains.
   */
  async #park(gap: VersionGapError, delivery: RawDelivery, envelope: EventEnvelope, print: string, attempt: number): Promise<Settlement> {
    const limits = this.options.reorderBuffer!;
    const eventId = envelope.eventId;
    let result: ParkResult;
    try {
      result = await withTransaction(this.#pool, async (tx) => {
        const parked = await parkEvent(tx, this.#schema, { consumer: this.options.consumer, projection: gap.key.projection, envelope, fingerprint: print, waitingFor: gap.currentVersion + 1, delivery }, limits);
        // An already-parked copy adds nothing, and the parked row (which drains) may lack the replay header.
        if (parked.status === 'parked' || parked.status === 'already-parked') await recordReplayOutcomes(tx, this.#schema, [{ delivery, outcome: parked.status === 'parked' ? 'parked' : 'duplicate' }]);
        return parked;
      });
    } catch (err) {
      const retry = this.#retryLater(attempt, 'database-unavailable', eventId);
      this.options.logger.warn({ eventId, ...traceFields(delivery, envelope), attempt, delayMs: retry.delayMs, ...describeError(err) }, 'could not park early event; it will be retried');
      return retry;
    }
    if (result.status === 'conflict') {
      const conflict = new ContentConflictError(this.options.consumer, eventId, result.parkedFingerprint, print);
      const settlement = await this.#quarantine(delivery, eventId, print, 'content-conflict', conflict.message);
      if (settlement.action === 'ack' && settlement.outcome === 'quarantined') settlement.conflict = conflict;
      return settlement;
    }
    if (result.status === 'full') {
      const retry = this.#retryLater(attempt, 'reorder-buffer-full', eventId);
      this.options.logger.warn({ eventId, ...traceFields(delivery, envelope), aggregateType: envelope.aggregateType, aggregateId: envelope.aggregateId, limit: result.limit, delayMs: retry.delayMs }, 'reorder buffer full; early event waits in the retry queue');
      return retry;
    }
    this.options.logger.debug({ eventId, aggregateId: envelope.aggregateId, version: envelope.aggregateVersion, waitingFor: gap.currentVersion + 1 }, 'early event parked until its predecessor applies');
    const state = await readProjectionState(this.#pool, { ...gap.key, schema: this.options.schema });
    if ((state?.version ?? 0) + 1 >= envelope.aggregateVersion) await this.#drainAggregate(envelope);
    return { action: 'ack', outcome: 'parked', eventId };
  }

  /**
   * Drains every parked event that can apply now, whoever moved its projection (a repair, a
   * rebuild, another process before a restart). The consumer runs it when it subscribes.
   * Returns how many events left the buffer.
   */
  async drainReady(): Promise<number> {
    if (!this.options.reorderBuffer) return 0;
    let left = 0;
    for (;;) {
      const ready = await aggregatesReady(this.#pool, this.#schema, this.options.consumer, DRAIN_BATCH);
      let progressed = 0;
      for (const aggregate of ready) progressed += await this.#drainAggregate(aggregate);
      left += progressed;
      if (ready.length < DRAIN_BATCH || progressed === 0) return left;
    }
  }

  /** Drops parked rows whose events were handed back to the broker for a retry. */
  async releaseParked(eventIds: string[]): Promise<void> {
    await unpark(this.#pool, this.#schema, this.options.consumer, eventIds);
  }

  async #quarantine(delivery: RawDelivery, eventId: string | null, print: string | null, reason: QuarantineReason, detail: string, parked = false): Promise<Settlement> {
    try {
      const quarantineId = await withTransaction(this.#pool, async (tx) => {
        const id = await quarantine(tx, this.#schema, this.#quarantineEntry(delivery, eventId, print, reason, detail));
        if (parked && eventId !== null) await unpark(tx, this.#schema, this.options.consumer, [eventId]);
        // A replay that fails again links its original row to the new open one.
        await recordReplayOutcomes(tx, this.#schema, [{ delivery, outcome: reason === 'content-conflict' ? 'conflict' : 'quarantined', quarantineId: id }]);
        return id;
      });
      this.options.logger.error({ eventId, ...traceFields(delivery), reason, quarantineId }, 'delivery quarantined for a person to inspect');
      return { action: 'ack', outcome: 'quarantined', reason, eventId, quarantineId };
    } catch (err) {
      // Without a durable quarantine row the delivery must not be acked: let it come back.
      const attempt = readAttempt(delivery);
      const retry = this.#retryLater(attempt, 'quarantine-unavailable', eventId);
      this.options.logger.warn({ eventId, ...traceFields(delivery), reason, ...describeError(err) }, 'could not write quarantine row; retrying delivery');
      return retry;
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


/** The stale version is this event's own (not one a handler hit while writing another aggregate). */
function isAbout(err: StaleVersionError, envelope: EventEnvelope): boolean {
  return err.key.aggregateType === envelope.aggregateType && err.key.aggregateId === envelope.aggregateId && err.eventVersion === envelope.aggregateVersion;
}

/** The outcome to record for a settled replay; retries are still in flight and record nothing. */
function replayRecord(delivery: RawDelivery, settlement: Settlement): ReplayRecord | null {
  if (settlement.action === 'retry') return null;
  if (settlement.outcome !== 'quarantined') return { delivery, outcome: settlement.outcome };
  return { delivery, outcome: settlement.reason === 'content-conflict' ? 'conflict' : 'quarantined', quarantineId: settlement.quarantineId };
}

function isApplied(settlement: Settlement | undefined): boolean {
  return settlement?.action === 'ack' && settlement.outcome === 'applied';
}

function isStillParked(settlement: Settlement): boolean {
  return settlement.action === 'ack' && settlement.outcome === 'parked';
}
