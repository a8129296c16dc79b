import type { Executor } from '../db/executor.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';

import { runStatement } from '../db/statement.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import type { AggregateRef, RawDelivery } from './types.js';
import { inboxSql } from './sql.js';
import { decodeProperties, encodeProperties } from './stored-properties.js';
import { z } from 'zod';
import { inboxScopeOption } from '../runtime/option-fields.js';
import { defineOptions, schemaOption } from '../runtime/options.js';

/** Bounds of the reorder buffer, per consumer (inbox scope). */
export interface ReorderBufferLimits {
  /** Parked events of one aggregate; beyond it a further early event waits in the retry queue. Default 1,000. */
  maxPerAggregate: number;
  /** Parked events of the whole consumer. Default 100,000. */
  maxTotal: number;
}

export const DEFAULT_REORDER_BUFFER: ReorderBufferLimits = { maxPerAggregate: 1_000, maxTotal: 100_000 };

export interface ParkEntry {
  consumer: string;
  projection: string;
  envelope: EventEnvelope;
  fingerprint: string;
  /** The version the projection waits for (current + 1). */
  waitingFor: number;
  delivery: RawDelivery;
}

export type ParkResult =
  | { status: 'parked' }
  /** The same event (same fingerprint) is parked already: nothing to add. */
  | { status: 'already-parked' }
  /** Another event with this eventId is parked: a content conflict. */
  | { status: 'conflict'; parkedFingerprint: string }
  | { status: 'full'; limit: 'per-aggregate' | 'total' };

/** Parks an early incremental event on the caller's transaction, within the limits. */
export async function parkEvent(
  tx: Executor,
  schema: SchemaRef,
  entry: ParkEntry,
  limits: ReorderBufferLimits,
): Promise<ParkResult> {
  const sql = inboxSql(schema);
  const { envelope } = entry;
  const existing = await runStatement<{ fingerprint: string }>(tx, sql.parkedFingerprint, [
    entry.consumer,
    envelope.eventId,
  ]);
  const parkedFingerprint = existing.rows[0]?.fingerprint;
  if (parkedFingerprint !== undefined) {
    return parkedFingerprint === entry.fingerprint
      ? { status: 'already-parked' }
      : { status: 'conflict', parkedFingerprint };
  }
  const counts = await runStatement<{ aggregate: string; total: string }>(tx, sql.parkedCounts, [
    entry.consumer,
    envelope.aggregateType,
    envelope.aggregateId,
    limits.maxTotal,
  ]);
  const { aggregate, total } = counts.rows[0]!;
  if (Number(aggregate) >= limits.maxPerAggregate) return { status: 'full', limit: 'per-aggregate' };
  if (Number(total) >= limits.maxTotal) return { status: 'full', limit: 'total' };
  // Exact even when a header holds U+0000, which jsonb cannot (see stored-properties.ts).
  const stored = encodeProperties({ properties: entry.delivery.properties, fields: entry.delivery.fields });
  const inserted = await runStatement(tx, sql.park, [
    entry.consumer,
    envelope.eventId,
    entry.fingerprint,
    entry.projection,
    envelope.aggregateType,
    envelope.aggregateId,
    envelope.aggregateVersion,
    entry.waitingFor,
    stored.queryable,
    entry.delivery.content,
    stored.exact,
  ]);
  // A concurrent park of the same eventId won the insert; the next delivery judges it.
  return inserted.rowCount === 1 ? { status: 'parked' } : { status: 'already-parked' };
}

export type { AggregateRef } from './types.js';

/** Which of the aggregates that just reached `version` have parked events that may drain now. */
export async function aggregatesToDrain(
  executor: Executor,
  schema: SchemaRef,
  consumer: string,
  reached: (AggregateRef & { version: number })[],
): Promise<AggregateRef[]> {
  if (reached.length === 0) return [];
  const { rows } = await runStatement<{ aggregate_type: string; aggregate_id: string }>(
    executor,
    inboxSql(schema).parkedSuccessors,
    [consumer, reached.map((r) => r.aggregateType), reached.map((r) => r.aggregateId), reached.map((r) => r.version)],
  );
  return rows.map((row) => ({ aggregateType: row.aggregate_type, aggregateId: row.aggregate_id }));
}

/** Aggregates of `consumer` whose parked events can apply now, whatever moved their projection. */
export async function aggregatesReady(
  executor: Executor,
  schema: SchemaRef,
  consumer: string,
  limit: number,
): Promise<AggregateRef[]> {
  const { rows } = await runStatement<{ aggregate_type: string; aggregate_id: string }>(
    executor,
    inboxSql(schema).parkedReady,
    [consumer, limit],
  );
  return rows.map((row) => ({ aggregateType: row.aggregate_type, aggregateId: row.aggregate_id }));
}

export interface ParkedDelivery {
  eventId: string;
  version: number;
  delivery: RawDelivery;
}

/** The parked deliveries of one aggregate in version order, rebuilt as they arrived. */
type StoredDelivery = { properties: RawDelivery['properties']; fields: RawDelivery['fields'] };

export async function loadParked(
  executor: Executor,
  schema: SchemaRef,
  consumer: string,
  aggregate: AggregateRef,
  limit: number,
): Promise<ParkedDelivery[]> {
  const { rows } = await runStatement<{
    event_id: string;
    aggregate_version: string;
    properties: StoredDelivery;
    properties_exact: string | null;
    body: Buffer;
  }>(executor, inboxSql(schema).parkedOfAggregate, [consumer, aggregate.aggregateType, aggregate.aggregateId, limit]);
  return rows.map((row) => {
    const { properties, fields } = decodeProperties(row.properties_exact, row.properties);
    return {
      eventId: row.event_id,
      version: Number(row.aggregate_version),
      delivery: { content: row.body, properties, fields },
    };
  });
}

/** Removes parked rows on the transaction that recorded their events in the inbox. */
export async function unpark(tx: Executor, schema: SchemaRef, consumer: string, eventIds: string[]): Promise<void> {
  if (eventIds.length > 0) await runStatement(tx, inboxSql(schema).unpark, [consumer, eventIds]);
}

/** An aggregate whose next version is missing while later ones wait in the reorder buffer. */
export interface Gap {
  consumer: string;
  projection: string;
  aggregateType: string;
  aggregateId: string;
  /** Applied version in the projection (0 if none). */
  currentVersion: number;
  /** The version that must arrive (or be repaired) before the parked ones can apply. */
  missingVersion: number;
  parkedVersions: number[];
  oldestParkedAt: Date;
  /** How long the oldest parked event has waited. */
  ageMs: number;
}

export const gapQueryOptions = defineOptions(
  'readGaps',
  z.strictObject({
    schema: schemaOption,
    consumer: inboxScopeOption.optional().describe('Only this consumer (inbox scope); all by default.'),
    olderThanMs: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe('Only gaps whose oldest parked event waited at least this long, in ms.'),
    limit: z.number().int().min(1).max(100_000).default(1_000).describe('Most rows returned, oldest first.'),
  }),
);

export type GapQuery = z.input<typeof gapQueryOptions.schema>;

/**
 * Aggregates stuck on a missing version: what the projection has, what waits, and since
 * when. Early events that did not fit in the buffer wait in the retry queue and are not listed.
 */
export async function readGaps(executor: Executor, input: GapQuery = {}): Promise<Gap[]> {
  const query = gapQueryOptions.parse(input);
  const schema = schemaRef(query.schema, 'schema');
  const { rows } = await executor.query<{
    consumer: string;
    projection: string;
    aggregate_type: string;
    aggregate_id: string;
    current_version: string;
    parked_versions: string[];
    oldest_parked_at: Date;
    age_ms: string;
  }>(inboxSql(schema).gaps, [query.consumer ?? null, query.olderThanMs, query.limit]);
  return rows.map((row) => ({
    consumer: row.consumer,
    projection: row.projection,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    currentVersion: Number(row.current_version),
    missingVersion: Number(row.current_version) + 1,
    parkedVersions: row.parked_versions.map(Number),
    oldestParkedAt: row.oldest_parked_at,
    ageMs: Number(row.age_ms),
  }));
}
