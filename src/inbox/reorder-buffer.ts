import type pg from 'pg';
import { withTransaction } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { aggregateKey, readState } from '../projection/index.js';
import {
  aggregatesReady,
  aggregatesToDrain,
  loadParked,
  parkEvent,
  unpark,
  type ParkResult,
  type ReorderBufferLimits,
} from './parking.js';
import { readAttempt } from './headers.js';
import { recordReplayOutcomes } from './replay.js';
import type { AggregateRef, Candidate, DrainSink, DrainedEvent, RawDelivery, Settlement } from './types.js';

/** Parked events of one aggregate taken per drain transaction. */
const DRAIN_BATCH = 256;

export interface ReorderBufferScope {
  pool: pg.Pool;
  schema: SchemaRef;
  consumer: string;
  limits: ReorderBufferLimits;
  /** Reads a parked delivery again: parsed and upcast by the same rules as when it arrived. */
  prepare: (delivery: RawDelivery) => { envelope: EventEnvelope; print: string };
  /** Runs drained events through the consumer transaction, as for fresh deliveries. */
  apply: (candidates: Candidate[]) => Promise<Map<number, Settlement>>;
  /** Settles drained events at the transport and returns the eventIds handed back to it. */
  sink: DrainSink;
}

/** What parks: an early incremental event and the version its projection waits for. */
export interface ParkRequest {
  delivery: RawDelivery;
  envelope: EventEnvelope;
  print: string;
  projection: string;
  waitingFor: number;
}

/**
 * Incremental events that arrived before their predecessor wait here (the `parked` table,
 * committed before the delivery is acked) and drain as soon as the missing version applied,
 * each in a consumer transaction with its inbox row.
 */
export class ReorderBuffer {
  readonly #scope: ReorderBufferScope;

  constructor(scope: ReorderBufferScope) {
    this.#scope = scope;
  }

  /** Stores an early event within the limits; throws when the database cannot. */
  async park(request: ParkRequest): Promise<ParkResult> {
    const { pool, schema, consumer, limits } = this.#scope;
    const { delivery, envelope, print } = request;
    return withTransaction(pool, async (tx) => {
      const parked = await parkEvent(
        tx,
        schema,
        {
          consumer,
          projection: request.projection,
          envelope,
          fingerprint: print,
          waitingFor: request.waitingFor,
          delivery,
        },
        limits,
      );
      // An already-parked copy adds nothing, and the parked row (which drains) may lack the replay header.
      if (parked.status === 'parked' || parked.status === 'already-parked')
        await recordReplayOutcomes(tx, schema, [
          { delivery, outcome: parked.status === 'parked' ? 'parked' : 'duplicate' },
        ]);
      return parked;
    });
  }

  /**
   * After parking, one more look at the projection: if the predecessor committed meanwhile,
   * its own drain check may have run before the parked row existed, so this side drains.
   */
  async drainIfCaughtUp(projection: string, envelope: EventEnvelope): Promise<void> {
    const state = await readState(this.#scope.pool, this.#scope.schema, {
      projection,
      aggregateType: envelope.aggregateType,
      aggregateId: envelope.aggregateId,
    });
    if ((state?.version ?? 0) + 1 >= envelope.aggregateVersion) await this.drainAggregate(envelope);
  }

  /**
   * Committed events may have made parked successors applicable: drain them now, in the
   * same consumer flow. One indexed query per batch when nothing is parked.
   */
  async drainAfter(applied: readonly EventEnvelope[]): Promise<void> {
    if (applied.length === 0) return;
    const reached = new Map<string, AggregateRef & { version: number }>();
    for (const envelope of applied) {
      const key = aggregateKey(envelope);
      const version = Math.max(reached.get(key)?.version ?? 0, envelope.aggregateVersion);
      reached.set(key, { aggregateType: envelope.aggregateType, aggregateId: envelope.aggregateId, version });
    }
    const { pool, schema, consumer } = this.#scope;
    for (const aggregate of await aggregatesToDrain(pool, schema, consumer, [...reached.values()]))
      await this.drainAggregate(aggregate);
  }

  /**
   * Drains every parked event that can apply now, whoever moved its projection (a repair, a
   * rebuild, another process before a restart). Returns how many events left the buffer.
   */
  async drainReady(): Promise<number> {
    const { pool, schema, consumer } = this.#scope;
    let left = 0;
    for (;;) {
      const ready = await aggregatesReady(pool, schema, consumer, DRAIN_BATCH);
      let progressed = 0;
      for (const aggregate of ready) progressed += await this.drainAggregate(aggregate);
      left += progressed;
      if (ready.length < DRAIN_BATCH || progressed === 0) return left;
    }
  }

  /** Applies the parked events of one aggregate for as long as that makes progress; returns how many left the buffer. */
  async drainAggregate(aggregate: AggregateRef): Promise<number> {
    let left = 0;
    for (;;) {
      const parked = await loadParked(
        this.#scope.pool,
        this.#scope.schema,
        this.#scope.consumer,
        aggregate,
        DRAIN_BATCH,
      );
      if (parked.length === 0) return left;
      const candidates = parked.map(({ delivery }, index): Candidate => ({
        index,
        delivery,
        ...this.#scope.prepare(delivery),
        attempt: readAttempt(delivery),
        parked: true,
      }));
      const settled = await this.#scope.apply(candidates);
      const drained: DrainedEvent[] = candidates.map((c) => ({
        delivery: c.delivery,
        settlement: settled.get(c.index)!,
      }));
      const done = drained.filter((d) => !isStillParked(d.settlement));
      await this.release(await this.#scope.sink(done));
      left += done.filter((d) => d.settlement.action === 'ack').length;
      if (drained.every((d) => isStillParked(d.settlement) || d.settlement.action === 'retry')) return left;
    }
  }

  /** Drops parked rows whose events were handed back to the broker for a retry. */
  async release(eventIds: string[]): Promise<void> {
    await unpark(this.#scope.pool, this.#scope.schema, this.#scope.consumer, eventIds);
  }
}

function isStillParked(settlement: Settlement): boolean {
  return settlement.action === 'ack' && settlement.outcome === 'parked';
}
