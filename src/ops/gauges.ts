import type { Executor } from '../db/executor.js';
import type { SchemaRef } from '../runtime/identifier.js';
import type { ConsumerLag } from './lag-budget.js';
import { opsSql } from './sql.js';

// The lag budget's judgement is shared with metrics through this file, as the reads are.
export { judgeLagBudgets, type ConsumerLag, type LagBudgetFacts } from './lag-budget.js';

/** Outbox rows of one status and, for `pending`, the age of the oldest. */
export interface OutboxStatusCount {
  status: 'pending' | 'published' | 'failed';
  rows: number;
  oldestAgeSeconds: number | null;
}

/** One consumer's reorder buffer: parked events, aggregates waiting past the gap threshold, the oldest wait. */
export interface ReorderBufferCount {
  consumer: string;
  parked: number;
  gaps: number;
  oldestAgeSeconds: number | null;
}

/** Outbox rows by status (statuses without rows are absent): the relay's backlog, read from the database. */
export async function readOutboxByStatus(executor: Executor, schema: SchemaRef): Promise<OutboxStatusCount[]> {
  const { rows } = await executor.query<{
    status: OutboxStatusCount['status'];
    n: string;
    oldest_age_seconds: string | null;
  }>(opsSql(schema).outboxStatus);
  return rows.map((row) => ({
    status: row.status,
    rows: Number(row.n),
    oldestAgeSeconds: ageOrNull(row.oldest_age_seconds),
  }));
}

/** Failed outbox rows per reason (at most the 20 most common), for status displays. */
export async function readFailedReasons(executor: Executor, schema: SchemaRef): Promise<Record<string, number>> {
  const { rows } = await executor.query<{ reason: string; n: string }>(opsSql(schema).failedReasons);
  return Object.fromEntries(rows.map((row) => [row.reason, Number(row.n)]));
}

/** Per consumer with parked events; an aggregate is a gap once its oldest parked event waited `gapAfterMs`. */
export async function readReorderBuffer(
  executor: Executor,
  schema: SchemaRef,
  gapAfterMs: number,
): Promise<ReorderBufferCount[]> {
  const { rows } = await executor.query<{
    consumer: string;
    parked: string;
    gaps: string;
    oldest_age_seconds: string | null;
  }>(opsSql(schema).reorderBuffer, [gapAfterMs]);
  return rows.map((row) => ({
    consumer: row.consumer,
    parked: Number(row.parked),
    gaps: Number(row.gaps),
    oldestAgeSeconds: ageOrNull(row.oldest_age_seconds),
  }));
}

/**
 * End-to-end lag per consumer over the last `windowMs`, from durable inbox rows (the BRIN index
 * on received_at bounds the scan to the window): the same numbers for status, metrics and any process.
 */
export async function readLag(executor: Executor, schema: SchemaRef, windowMs: number): Promise<ConsumerLag[]> {
  const { rows } = await executor.query<{ consumer: string; p50: number; p99: number; max: string; events: string }>(
    opsSql(schema).lag,
    [windowMs],
  );
  return rows.map((r) => ({
    consumer: r.consumer,
    p50Seconds: Number(r.p50),
    p99Seconds: Number(r.p99),
    maxSeconds: Number(r.max),
    events: Number(r.events),
  }));
}

function ageOrNull(seconds: string | null): number | null {
  return seconds === null ? null : Number(seconds);
}
