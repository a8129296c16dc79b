import type pg from 'pg';
import { leasePool } from '../db/pool.js';
import { withTransaction } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import type { UntypedEvents } from '../envelope/events.js';
import { fingerprint } from '../envelope/fingerprint.js';
import { parseEnvelope } from '../envelope/validate.js';
import { CommitRolledBackError, ContentConflictError } from '../runtime/errors.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { describeError } from '../runtime/logger.js';
import { applyInTransaction, inVersionOrder, isHandled, type DispatchScope } from './dispatch.js';
import { decideFailure } from './failure-policy.js';
import { HeaderKey } from './header-key.js';
import { markUntrusted, readAttempt, traceFields, trustHeaders } from './headers.js';
import { resolveProcessorOptions, type ProcessorOptions, type ResolvedProcessorOptions } from './options.js';
import { parkEarlyEvent } from './park-early.js';
import { ReorderBuffer } from './reorder-buffer.js';
import { Settler } from './settle.js';
import type { AggregateRef, Candidate, DrainSink, FailedDelivery as Failed, RawDelivery, Settlement } from './types.js';
import { upcast } from './upcast.js';
import { traceDeliveries } from '../telemetry/index.js';

export type { Settlement, DrainedEvent, DrainSink } from './types.js';

/**
 * Options a consumer resolved already (validated once, there), and where drained events
 * go. A processor built from it does not parse options again.
 */
export class ProcessorSetup {
  constructor(
    readonly options: ResolvedProcessorOptions,
    readonly sink: DrainSink,
  ) {}
}

/** Without a transport, nothing is handed back: a drained event to retry stays parked and drains again later. */
const keepParked: DrainSink = async () => [];

/**
 * Turns deliveries into local transactions: validate, insert the inbox rows, run the
 * handlers, commit, and tell the transport how to settle each delivery. A batch shares one
 * transaction; if anything in it fails, every delivery of the batch is processed again on
 * its own, so each keeps its own outcome (applied, duplicate, conflict, gap, quarantine).
 * Failures are judged by the failure policy (failure-policy.ts) and carried out here. It
 * never talks to the broker, so the same code serves the subscription loop and a basic.get
 * loop alike. Read top-down: processBatch → #processCandidates → dispatch → #settleFailure.
 */
export class DeliveryProcessor<M extends object = UntypedEvents> {
  readonly options: ResolvedProcessorOptions;
  readonly #pool: pg.Pool;
  readonly #releasePool: () => Promise<void>;
  readonly #schema: SchemaRef;
  readonly #dispatch: DispatchScope;
  readonly #settler: Settler;
  readonly #buffer: ReorderBuffer | null;
  /** prepareAhead's results until their batch takes them. */
  readonly #ahead = new WeakMap<RawDelivery, Prepared>();
  /** Converge's own headers are honoured only when signed with this key (headers.ts). */
  readonly headerKey: HeaderKey;

  /** Validates `options` (a handler is required); a ProcessorSetup comes validated from the consumer. */
  constructor(options: ProcessorOptions<M> | ProcessorSetup) {
    const setup =
      options instanceof ProcessorSetup ? options : new ProcessorSetup(resolveProcessorOptions(options), keepParked);
    const resolved = setup.options;
    this.options = resolved;
    this.#schema = schemaRef(resolved.schema);
    const lease = leasePool(resolved.pool, {
      connectionString: resolved.connectionString,
      max: 4,
      applicationName: 'converge-consumer',
      logger: resolved.logger,
      poolMode: resolved.poolMode,
    });
    this.#pool = lease.pool;
    this.#releasePool = () => lease.release();
    this.headerKey = new HeaderKey(this.#pool, this.#schema);
    const scope = { pool: this.#pool, schema: this.#schema, consumer: resolved.consumer, logger: resolved.logger };
    this.#dispatch = {
      ...scope,
      handlers: resolved.handlers,
      batchHandler: resolved.batchHandler,
      events: resolved.events,
    };
    this.#settler = new Settler({ ...scope, backoff: resolved.backoff });
    this.#buffer = resolved.reorderBuffer
      ? new ReorderBuffer({
          ...scope,
          limits: resolved.reorderBuffer,
          prepare: (d) => this.#prepare(d),
          apply: (c) => this.#processCandidates(c),
          sink: setup.sink,
        })
      : null;
  }

  /** The pool it runs on, for read-only companions such as the consumer's metrics gauges. */
  get pool(): pg.Pool {
    return this.#pool;
  }

  async process(delivery: RawDelivery): Promise<Settlement> {
    const [settlement] = await this.processBatch([delivery]);
    return settlement!;
  }

  /** Settlements in the order of `deliveries`; each delivery in a CONSUMER span continuing its message's trace. */
  processBatch(deliveries: readonly RawDelivery[]): Promise<Settlement[]> {
    return traceDeliveries(deliveries, this.options.consumer, () => this.#processBatch(deliveries));
  }

  async #processBatch(deliveries: readonly RawDelivery[]): Promise<Settlement[]> {
    const settlements = new Array<Settlement>(deliveries.length);
    const key = await this.headerKey.get();
    const untrusted = deliveries.map((delivery) => trustHeaders(delivery, key));
    const candidates: Candidate[] = [];
    const later: Candidate[] = [];
    const ids = new Set<string>();
    for (const [index, delivery] of deliveries.entries()) {
      const undecodable = delivery.properties.undecodableHeaders;
      if (undecodable) {
        // Nothing converge reads from headers (attempt, origin, trace) is known: the body is not trusted either.
        this.#ahead.delete(delivery);
        settlements[index] = await this.#settler.quarantine({
          delivery,
          eventId: null,
          print: null,
          reason: 'undecodable-headers',
          detail: undecodable.detail,
        });
        continue;
      }
      const attempt = readAttempt(delivery);
      const prepared = this.#ahead.get(delivery) ?? this.#tryPrepare(delivery);
      this.#ahead.delete(delivery);
      if ('failed' in prepared) {
        settlements[index] = await this.#settleFailure(prepared.failed, {
          delivery,
          envelope: prepared.sent,
          print: prepared.print,
          attempt,
        });
        continue;
      }
      const { envelope, print } = prepared;
      if (!isHandled(this.#dispatch, envelope)) {
        settlements[index] = await this.#settleUnknownType(delivery, envelope, print);
        continue;
      }
      // A second copy of an event inside one batch is judged after the first has committed.
      (ids.has(envelope.eventId) ? later : candidates).push({ index, delivery, envelope, print, attempt });
      ids.add(envelope.eventId);
    }
    for (const [index, settlement] of (await this.#processCandidates(candidates)).entries())
      settlements[index] = settlement;
    for (const candidate of later)
      settlements[candidate.index] = (await this.#processCandidates([candidate])).get(candidate.index)!;
    // A duplicate's version was reached before, maybe by a delivery whose drain failed after its
    // commit (the database went away, the batch came back): nothing else would drain what it left parked.
    const reached = [...candidates, ...later].filter((c) => reachedVersion(settlements[c.index]));
    await this.#buffer?.drainAfter(reached.map((c) => c.envelope));
    return markUntrusted(settlements, untrusted);
  }

  /**
   * Drains every parked event that can apply now, whoever moved its projection (a repair, a
   * rebuild, another process before a restart). The consumer runs it when it subscribes.
   * Returns how many events left the buffer.
   */
  async drainReady(): Promise<number> {
    await this.headerKey.get();
    return (await this.#buffer?.drainReady()) ?? 0;
  }

  /** Drains the parked events of one aggregate that can apply now (gap repair calls it); returns how many left the buffer. */
  async drainAggregate(aggregate: AggregateRef): Promise<number> {
    await this.headerKey.get();
    return (await this.#buffer?.drainAggregate(aggregate)) ?? 0;
  }

  async close(): Promise<void> {
    await this.#releasePool();
  }

  /**
   * Parses, fingerprints the event as it was sent (duplicates and conflicts compare what the
   * producer wrote, whatever this consumer's schema), then upcasts it to the current shape.
   */
  #prepare(delivery: RawDelivery): { envelope: EventEnvelope; print: string } {
    trustHeaders(delivery, this.headerKey.loaded);
    const sent = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
    return { envelope: upcast(sent, this.options.schemas, this.options.handlers), print: fingerprint(sent) };
  }

  /**
   * Parses, fingerprints and upcasts a delivery now, for the batch that will take it: called as
   * deliveries arrive, this CPU work overlaps the transaction of the batch before instead of
   * delaying the next one. Pure (the same result whenever it runs), so nothing changes but when.
   */
  prepareAhead(delivery: RawDelivery): void {
    this.#ahead.set(delivery, this.#tryPrepare(delivery));
  }

  /**
   * #prepare for a fresh delivery, keeping what failed for #settleFailure. A valid envelope that
   * cannot be upcast (a newer schema version) keeps its eventId and fingerprint in the
   * quarantine row, so `dlq list` and a replay can name the event.
   */
  #tryPrepare(delivery: RawDelivery): Prepared {
    let sent: EventEnvelope | null = null;
    let print: string | null = null;
    try {
      sent = parseEnvelope(delivery.content, this.options.maxEnvelopeBytes);
      print = fingerprint(sent);
      return { envelope: upcast(sent, this.options.schemas, this.options.handlers), print };
    } catch (err) {
      return { failed: err, sent, print };
    }
  }

  /** One transaction for all candidates; if it fails, each candidate again on its own. */
  async #processCandidates(candidates: Candidate[]): Promise<Map<number, Settlement>> {
    const settled = new Map<number, Settlement>();
    if (candidates.length === 0) return settled;
    const ordered = inVersionOrder(candidates);
    try {
      const outcome = await withTransaction(this.#pool, (tx) => applyInTransaction(tx, this.#dispatch, ordered));
      for (const candidate of ordered) settled.set(candidate.index, outcome.get(candidate.envelope.eventId)!);
      return settled;
    } catch (err) {
      if (ordered.length === 1) {
        const only = ordered[0]!;
        if (err instanceof CommitRolledBackError) this.#warnCaughtSqlError(only);
        settled.set(only.index, await this.#settleFailure(err, only));
        return settled;
      }
      this.options.logger.debug(
        { size: ordered.length, ...describeError(err) },
        'batch rolled back; processing its deliveries one by one',
      );
      for (const candidate of ordered)
        settled.set(candidate.index, (await this.#processCandidates([candidate])).get(candidate.index)!);
      return settled;
    }
  }

  /** The error cannot say which handler swallowed an SQL error; its author can fix it, so name the event type and the way out. */
  #warnCaughtSqlError({ delivery, envelope, attempt }: Candidate): void {
    this.options.logger.warn(
      { eventId: envelope.eventId, eventType: envelope.eventType, ...traceFields(delivery, envelope), attempt },
      'PostgreSQL answered COMMIT with ROLLBACK: a handler caught an SQL error, which aborted the transaction, ' +
        'so nothing was written; let the error propagate, or use a SAVEPOINT or INSERT ... ON CONFLICT for an error it means to ignore',
    );
  }

  async #settleUnknownType(delivery: RawDelivery, envelope: EventEnvelope, print: string): Promise<Settlement> {
    if (this.options.unknownEventType === 'ignore') return this.#settler.ignored(delivery, envelope.eventId);
    return this.#settler.quarantine({
      delivery,
      eventId: envelope.eventId,
      print,
      reason: 'unknown-event-type',
      detail: `no handler for eventType ${envelope.eventType}`,
    });
  }

  /** Carries out the failure policy's decision for one delivery (or parked event) whose processing failed. */
  async #settleFailure(err: unknown, failed: Failed): Promise<Settlement> {
    const { delivery, envelope, print, attempt } = failed;
    const parked = failed.parked ?? false;
    const eventId = envelope?.eventId ?? null;
    const decision = decideFailure(err, {
      envelope,
      attempt,
      maxAttempts: this.options.maxAttempts,
      reorderBuffer: this.#buffer !== null,
      parked,
    });
    switch (decision.action) {
      case 'stay-parked':
        return { action: 'ack', outcome: 'parked', eventId: eventId! };
      case 'park':
        // The policy parks only when told there is a buffer, and only an event it has (with its fingerprint).
        return parkEarlyEvent(
          {
            buffer: this.#buffer!,
            settler: this.#settler,
            consumer: this.options.consumer,
            logger: this.options.logger,
          },
          {
            delivery,
            envelope: envelope!,
            print: print!,
            projection: decision.projection,
            waitingFor: decision.waitingFor,
          },
          attempt,
        );
      case 'check-compaction': {
        const compacted = await this.#settler.ifCompacted(envelope!, attempt, parked);
        if (compacted) return compacted;
        return this.#settler.quarantine({
          delivery,
          eventId,
          print,
          reason: decision.otherwise.reason,
          detail: decision.otherwise.detail,
          parked,
        });
      }
      case 'quarantine': {
        const conflict = err instanceof ContentConflictError ? err : undefined;
        return this.#settler.quarantine({
          delivery,
          eventId,
          print,
          reason: decision.reason,
          detail: decision.detail,
          parked,
          conflict,
        });
      }
      case 'retry': {
        const retry = this.#settler.retryLater(attempt, decision.reason, eventId);
        this.options.logger.warn(
          {
            eventId,
            ...traceFields(delivery, envelope),
            attempt,
            delayMs: retry.delayMs,
            reason: decision.reason,
            ...describeError(err),
          },
          'delivery rolled back; it will be retried',
        );
        return retry;
      }
    }
  }
}

/** A parsed delivery, or why it could not be parsed (and what was known of it by then). */
type Prepared =
  { envelope: EventEnvelope; print: string } | { failed: unknown; sent: EventEnvelope | null; print: string | null };

function reachedVersion(settlement: Settlement | undefined): boolean {
  return settlement?.action === 'ack' && (settlement.outcome === 'applied' || settlement.outcome === 'duplicate');
}
