/**
 * The CDC relay (src/cdc) measured like the polling one: a drain of a seeded backlog, and the
 * end-to-end latency at a paced rate. It needs a PostgreSQL with wal_level=logical
 * (CDC_DATABASE_URL, which `npm run services` prepares), so it gets a schema, a slot and a
 * publication of its own there, removed at the end of the run.
 */
import type pg from 'pg';
import { CDC_DATABASE_URL } from '../kit/services.js';
import { createCdcSlot, dropCdcSlot, migrate } from '../src/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import { Worker } from './child.js';
import { createReadTable, noPendingRows, seedBacklog, settle, type RelayChoice } from './converge.js';
import { openPoolAt, sleep, unique, type BenchContext } from './env.js';
import { drain, type DrainCost } from './measure.js';
import { rate } from './stats.js';

export interface CdcBench {
  /** The run's context with its pool and schema on CDC_DATABASE_URL (broker and cleanup shared). */
  ctx: BenchContext;
  databaseUrl: string;
  slot: string;
  publication: string;
}

/** Schema, read table, publication and slot on the logical server; all removed by the run's cleanup. */
export async function openCdc(ctx: BenchContext): Promise<CdcBench> {
  const pool = await openPoolAt(CDC_DATABASE_URL, 4);
  ctx.cleanup.add('close the CDC pool', () => pool.end());
  const schema = unique('bench_cdc');
  const slot = schema;
  const publication = schema;
  ctx.cleanup.add(`drop schema ${schema} (CDC)`, () =>
    pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`),
  );
  // Registered before the slot exists: a slot left behind would retain WAL on that server for good.
  ctx.cleanup.add(`drop slot ${slot}`, () => dropCdcSlot(pool, { slot, publication }));
  await migrate(pool, { schema });
  await createReadTable(pool, schema);
  // Before any row is written: the slot streams what is committed after it exists.
  await createCdcSlot(pool, { schema, slot, publication });
  return {
    ctx: { ...ctx, pool, schema, databaseUrl: CDC_DATABASE_URL },
    databaseUrl: CDC_DATABASE_URL,
    slot,
    publication,
  };
}

/**
 * Runs `run` with a slot of its own on the same publication. A slot that streamed a drain keeps its
 * restart_lsn far behind its confirmed position (PostgreSQL 15 moves it only at a running-transactions
 * record, every 15 s or at a checkpoint), so the next session on it re-decodes the whole drain first,
 * and a pipeline run would time that backlog instead of the relay. Dropped afterwards, and by the
 * run's cleanup should `run` fail.
 */
export async function withFreshSlot<T>(cdc: CdcBench, run: (cdc: CdcBench) => Promise<T>): Promise<T> {
  const slot = unique('bench_cdc_run');
  const drop = () => dropSlotWhenFree(cdc.ctx.pool, slot);
  cdc.ctx.cleanup.add(`drop slot ${slot}`, drop);
  await createCdcSlot(cdc.ctx.pool, { schema: cdc.ctx.schema, slot, publication: cdc.publication });
  try {
    return await run({ ...cdc, slot });
  } finally {
    await drop();
  }
}

/** The walsender of a relay that just stopped may hold the slot a moment longer (SQLSTATE 55006). */
async function dropSlotWhenFree(pool: pg.Pool, slot: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [
        slot,
      ]);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '55006' || attempt === 100) throw err;
      await sleep(100);
    }
  }
}

export function cdcRelayConfig(cdc: CdcBench, exchange: string, ttlMs: number): Record<string, unknown> {
  return {
    databaseUrl: cdc.databaseUrl,
    schema: cdc.ctx.schema,
    exchange,
    slot: cdc.slot,
    publication: cdc.publication,
    ttlMs,
  };
}

/** cdc_relay_drain: a seeded backlog, one CDC relay process, until every row is marked published. */
export async function cdcRelayDrain(
  cdc: CdcBench,
  rows: number,
  timeoutMs: number,
): Promise<{ rate: number; cost: DrainCost }> {
  const { ctx } = cdc;
  const outbox = `${quoteIdentifier(ctx.schema)}.outbox`;
  await ctx.pool.query(`TRUNCATE ${outbox}`);
  await seedBacklog(ctx.pool, ctx.schema, rows);
  await settle(ctx.pool, [outbox]);
  const { elapsedMs, cost } = await drain(ctx, 'cdc_relay_drain', {
    prefix: 'cdcdrain',
    spawn: async ({ exchange }) => [
      await Worker.spawn('cdc-relay', { ...cdcRelayConfig(cdc, exchange, timeoutMs + 120_000), target: rows }),
    ],
    target: rows,
    timeoutMs,
    check: noPendingRows(ctx.pool, outbox),
  });
  return { rate: rate(rows, elapsedMs), cost };
}

/** The CDC relay as the relay process of bench/converge.ts's pipelines (the e2e latency at 1,000/s). */
export function cdcRelayChoice(cdc: CdcBench): RelayChoice {
  return { worker: 'cdc-relay', config: (exchange, ttlMs) => cdcRelayConfig(cdc, exchange, ttlMs) };
}
