import type pg from 'pg';
import client from 'prom-client';
import type { SchemaRef } from '../runtime/identifier.js';
import {
  judgeLagBudgets,
  readLag,
  readOutboxByStatus,
  readReorderBuffer,
  type LagBudgetFacts,
  type ReorderBufferCount,
} from '../ops/gauges.js';
import { databaseRead } from './health.js';
import { scrapedGauge } from './instruments.js';

// Gauges read from the database at scrape time (one read per scrape shared by a group), so every
// process and the CLI report the same durable state.

/**
 * Per budgeted consumer: the budget, the p99 end-to-end lag over the window (from inbox rows, so
 * every process reports the same) and 1 while it is over the budget. Consumers without events in
 * the window report NaN lag and 0 over budget: nothing recorded is not lag (a stopped consumer
 * shows in the queue depth instead).
 */
export function registerLagBudgetGauges(
  registry: client.Registry,
  pool: pg.Pool,
  schema: SchemaRef,
  budgetsMs: Record<string, number>,
  windowMs: number,
): void {
  const read = databaseRead(registry, async () => judgeLagBudgets(budgetsMs, await readLag(pool, schema, windowMs)));
  const gauge = perConsumerGauge(registry, read, (budget: LagBudgetFacts) => budget.name);
  gauge(
    'converge_lag_budget_seconds',
    'The end-to-end lag the consumer is allowed (its lag budget).',
    (b) => b.budgetSeconds,
  );
  gauge(
    'converge_lag_p99_seconds',
    `p99 of occurredAt → inbox row over the last ${windowMs} ms (NaN without events).`,
    (b) => b.p99Seconds ?? NaN,
  );
  gauge('converge_lag_over_budget', '1 while the p99 end-to-end lag is over the lag budget.', (b) =>
    b.overBudget ? 1 : 0,
  );
}

/**
 * Makes gauges labelled by consumer that share one database read per scrape: each collect sets
 * one value per row the read returned, after dropping the consumers it no longer returns.
 */
function perConsumerGauge<T>(
  registry: client.Registry,
  read: () => Promise<T[] | undefined>,
  consumerOf: (row: T) => string,
): (name: string, help: string, value: (row: T) => number) => client.Gauge {
  return (name, help, value) =>
    new client.Gauge({
      name,
      help,
      labelNames: ['consumer'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const row of (await read()) ?? []) this.set({ consumer: consumerOf(row) }, value(row));
      },
    });
}

/** Parked events, aggregates stuck on a missing version and the oldest wait, per consumer. */
export function registerReorderGauges(
  registry: client.Registry,
  pool: pg.Pool,
  schema: SchemaRef,
  gapAfterMs: number,
): void {
  const read = databaseRead(registry, () => readReorderBuffer(pool, schema, gapAfterMs));
  const gauge = perConsumerGauge(registry, read, (row: ReorderBufferCount) => row.consumer);
  gauge(
    'converge_parked_events',
    'Incremental events waiting in the reorder buffer for their predecessor.',
    (row) => row.parked,
  );
  gauge(
    'converge_gap_aggregates',
    `Aggregates whose next version has been missing for longer than ${gapAfterMs} ms.`,
    (row) => row.gaps,
  );
  gauge(
    'converge_oldest_parked_seconds',
    'Age of the oldest event in the reorder buffer.',
    (row) => row.oldestAgeSeconds ?? 0,
  );
}

/** Outbox rows by status and the age of the oldest pending one: the relay's backlog, from the database. */
export function registerOutboxGauges(registry: client.Registry, pool: pg.Pool, schema: SchemaRef): void {
  const read = databaseRead(registry, () => readOutboxByStatus(pool, schema));
  new client.Gauge({
    name: 'converge_outbox_rows',
    help: 'Outbox rows by status (pending, published, failed).',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await read();
      if (!rows) return;
      for (const status of ['pending', 'published', 'failed']) this.set({ status }, 0);
      for (const row of rows) this.set({ status: row.status }, row.rows);
    },
  });
  scrapedGauge(
    registry,
    'converge_outbox_oldest_pending_seconds',
    'Age of the oldest unpublished outbox event (0 when none, NaN when the database could not be read): the first thing to alert on.',
    async () => {
      const rows = await read();
      // NaN, not 0, when the database could not be read: 0 would claim an empty backlog.
      return rows ? (rows.find((r) => r.status === 'pending')?.oldestAgeSeconds ?? 0) : NaN;
    },
  );
}
