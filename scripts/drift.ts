/**
 * `npm run scenario:drift`: orders written through the outbox, a relay and a consumer, then a
 * projection corrupted in every class (rows deleted, versions rolled back, fields edited,
 * extra rows, events lost before the consumer), repaired by the reconciler while the consumer
 * keeps applying live traffic. Last line: `found=N repaired=N remaining=0`, N = what it corrupted.
 * `--orders N` (default 3000), `--seed S`.
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import {
  appendManyToOutbox,
  reconcile,
  startConsumer,
  startRelay,
  silentLogger,
  withTransaction,
  type Consumer,
  type NewEvent,
  type PagedReader,
  type ReconcileReport,
  type ReconcileRow,
  type Relay,
} from '../src/index.js';
import { AMQP_URL, createLabEnv, PROJECTION, waitUntil, type LabEnv } from '../lab/harness.js';

const { values: flags } = parseArgs({
  options: { orders: { type: 'string', default: '3000' }, seed: { type: 'string', default: '7' } },
});
const ORDERS = Number(flags.orders);
const PER_CLASS = 5;
let state = Number(flags.seed) >>> 0 || 1;
/** A small seeded generator, so a run's corruption is reproducible. */
const random = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const pick = <T>(items: T[]) => items.splice(Math.floor(random() * items.length), 1)[0]!;
const orderId = (i: number) => `o-${String(i).padStart(5, '0')}`;

async function main(): Promise<number> {
  const env = await createLabEnv();
  let relay: Relay | undefined;
  let consumer: Consumer | undefined;
  try {
    const q = `"${env.schema}"`;
    const versions = await writeOrders(env, ORDERS);
    const lost = await loseEvents(env, versions);
    consumer = startConsumer({
      amqpUrl: AMQP_URL,
      queue: env.queue,
      exchange: env.exchange,
      // The lab environment declared the queue with its expiry (lab/broker.ts): a plain declaration would disagree.
      declare: false,
      pool: env.pool,
      schema: env.schema,
      handlers: env.handlers,
      logger: silentLogger,
      batchSize: 200,
      prefetch: 500,
    });
    await consumer.ready();
    relay = startRelay({
      amqpUrl: AMQP_URL,
      declareExchange: false,
      pool: env.pool,
      schema: env.schema,
      exchange: env.exchange,
      logger: silentLogger,
      batchSize: 500,
    });
    const delivered = [...versions.values()].reduce((a, b) => a + b, 0) - lost.size;
    await waitUntil(
      async () => (await settledEvents(env)) >= delivered,
      `all ${delivered} delivered events applied or parked`,
      120_000,
    );
    console.error(`wrote ${ORDERS} orders, ${delivered + lost.size} events; lost ${lost.size} before the consumer`);

    const corrupted = await corrupt(env, versions, lost);
    console.error(
      `corrupted ${corrupted.size} aggregates: ${PER_CLASS} deleted, ${PER_CLASS} rolled back, ${PER_CLASS} edited, ${PER_CLASS} extra, ${lost.size} lost events`,
    );

    // Live traffic on other orders while the reconciler repairs.
    const live = [...versions.keys()].filter((id) => !corrupted.has(id)).slice(0, 200);
    const traffic = produce(env, versions, live);
    const repair = await reconcile(env.pool, {
      schema: env.schema,
      projection: PROJECTION,
      aggregateType: 'order',
      source: sourceReader(env.pool, q),
      target: targetReader(env.pool, q),
      pageSize: 250,
      sampleSize: 100_000,
      repair: {
        apply: async (tx, row) =>
          void (await tx.query(
            `INSERT INTO ${q}.order_projection (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`,
            [row.id, row.fields!.amount],
          )),
        lookup: async (id) => {
          const { rows } = await env.pool.query<{ id: string; version: string; amount: number }>(
            `SELECT id, version, amount FROM ${q}.orders WHERE id = $1`,
            [id],
          );
          return rows[0] ? toRow(rows[0]) : null;
        },
        remove: async (tx, id) => void (await tx.query(`DELETE FROM ${q}.order_projection WHERE id = $1`, [id])),
      },
    });
    const liveEvents = await traffic;
    // Events parked behind the lost ones are covered by the repairs' baselines now.
    await consumer.drainReady();
    await waitUntil(
      async () => (await settledEvents(env)) >= delivered + liveEvents,
      'the live traffic applied',
      60_000,
    );

    const after = await reconcile(env.pool, {
      schema: env.schema,
      projection: PROJECTION,
      aggregateType: 'order',
      source: sourceReader(env.pool, q),
      target: targetReader(env.pool, q),
      pageSize: 1_000,
    });
    const found = idsIn(repair).filter((id) => corrupted.has(id)).length;
    const stillWrong = new Set(idsIn(after));
    const repaired = [...corrupted].filter((id) => idsIn(repair).includes(id) && !stillWrong.has(id)).length;
    const remaining = total(after);
    const parked = Number((await env.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.parked`)).rows[0]?.n);
    console.error(
      `reconcile: ${JSON.stringify(repair.differences)} repaired ${repair.repaired} skipped ${repair.skipped} in ${repair.durationMs} ms; live traffic ${liveEvents} events; parked left ${parked}`,
    );
    console.log(`found=${found} repaired=${repaired} remaining=${remaining}`);
    return found === corrupted.size && repaired === corrupted.size && remaining === 0 && parked === 0 ? 0 : 1;
  } finally {
    await relay?.stop();
    await consumer?.stop();
    await env.close();
  }
}

/** Orders with 1-3 increments each, written with their events in transactions of 100 orders. */
async function writeOrders(env: LabEnv, orders: number): Promise<Map<string, number>> {
  const versions = new Map<string, number>();
  for (let from = 0; from < orders; from += 100) {
    await withTransaction(env.pool, async (tx) => {
      const events: NewEvent[] = [];
      for (let i = from; i < Math.min(orders, from + 100); i++) {
        const id = orderId(i);
        const steps = 1 + Math.floor(random() * 3);
        let amount = 0;
        for (let version = 1; version <= steps; version++) {
          const delta = 1 + Math.floor(random() * 50);
          amount += delta;
          events.push({
            aggregateType: 'order',
            aggregateId: id,
            aggregateVersion: version,
            eventType: 'AmountAdded',
            payload: { delta },
          });
        }
        versions.set(id, steps);
        await tx.query(`INSERT INTO "${env.schema}".orders (id, amount, version) VALUES ($1, $2, $3)`, [
          id,
          amount,
          steps,
        ]);
      }
      await appendManyToOutbox(tx, events, { schema: env.schema });
    });
  }
  return versions;
}

/** Marks a few events published without publishing them: two last versions, two first versions of 3-event orders. */
async function loseEvents(env: LabEnv, versions: Map<string, number>): Promise<Set<string>> {
  const threeSteps = [...versions].filter(([, v]) => v === 3).map(([id]) => id);
  const lost = new Map<string, number>();
  for (let k = 0; k < 4; k++) lost.set(pick(threeSteps), k < 2 ? 3 : 1);
  for (const [id, version] of lost) {
    await env.pool.query(
      `UPDATE "${env.schema}".outbox SET status = 'published', published_at = now() WHERE aggregate_id = $1 AND aggregate_version = $2`,
      [id, version],
    );
  }
  return new Set(lost.keys());
}

/** Damages the projection in every class, each on its own aggregates. */
async function corrupt(env: LabEnv, versions: Map<string, number>, lost: Set<string>): Promise<Set<string>> {
  const q = `"${env.schema}"`;
  const free = [...versions.keys()].filter((id) => !lost.has(id));
  const multi = free.filter((id) => versions.get(id)! >= 2);
  const take = (from: string[], n: number) =>
    Array.from({ length: n }, () => pick(from)).map(
      (id) => (free.splice(free.indexOf(id), 1), multi.includes(id) && multi.splice(multi.indexOf(id), 1), id),
    );
  const rolledBack = take(multi, PER_CLASS);
  const deleted = take(free, PER_CLASS);
  const edited = take(free, PER_CLASS);
  const state = `${q}.projection_state`;
  await env.pool.query(`UPDATE ${state} SET version = version - 1 WHERE projection = $1 AND aggregate_id = ANY($2)`, [
    PROJECTION,
    rolledBack,
  ]);
  await env.pool.query(`UPDATE ${q}.order_projection SET amount = amount - 1 WHERE id = ANY($1)`, [rolledBack]);
  await env.pool.query(`DELETE FROM ${state} WHERE projection = $1 AND aggregate_id = ANY($2)`, [PROJECTION, deleted]);
  await env.pool.query(`DELETE FROM ${q}.order_projection WHERE id = ANY($1)`, [deleted]);
  await env.pool.query(`UPDATE ${q}.order_projection SET amount = amount + 1000 WHERE id = ANY($1)`, [edited]);
  const extras = Array.from({ length: PER_CLASS }, (_, i) => `o-extra-${i}`);
  for (const id of extras) {
    await env.pool.query(
      `INSERT INTO ${state} (projection, aggregate_type, aggregate_id, version) VALUES ($1, 'order', $2, 1)`,
      [PROJECTION, id],
    );
    await env.pool.query(`INSERT INTO ${q}.order_projection (id, amount) VALUES ($1, 1)`, [id]);
  }
  return new Set([...rolledBack, ...deleted, ...edited, ...extras, ...lost]);
}

/** One more increment on each live order, through the outbox, while the reconciler runs. */
async function produce(env: LabEnv, versions: Map<string, number>, ids: string[]): Promise<number> {
  for (const id of ids) {
    await withTransaction(env.pool, async (tx) => {
      const version = versions.get(id)! + 1;
      versions.set(id, version);
      await tx.query(
        `UPDATE "${env.schema}".orders SET amount = amount + 1, version = $2 WHERE id = $1 AND version = $2 - 1`,
        [id, version],
      );
      await appendManyToOutbox(
        tx,
        [
          {
            aggregateType: 'order',
            aggregateId: id,
            aggregateVersion: version,
            eventType: 'AmountAdded',
            payload: { delta: 1 },
          },
        ],
        { schema: env.schema },
      );
    });
  }
  return ids.length;
}

function sourceReader(pool: pg.Pool, q: string): PagedReader {
  return async (after, limit) =>
    (
      await pool.query<{ id: string; version: string; amount: number }>(
        `SELECT id, version, amount FROM ${q}.orders WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
        [after ?? '', limit],
      )
    ).rows.map(toRow);
}

function targetReader(pool: pg.Pool, q: string): PagedReader {
  return async (after, limit) =>
    (
      await pool.query<{ id: string; version: string; amount: number }>(
        `SELECT s.aggregate_id AS id, s.version, p.amount FROM ${q}.projection_state s LEFT JOIN ${q}.order_projection p ON p.id = s.aggregate_id
          WHERE s.projection = $3 AND s.aggregate_type = 'order' AND s.aggregate_id COLLATE "C" > $1 ORDER BY s.aggregate_id COLLATE "C" LIMIT $2`,
        [after ?? '', limit, PROJECTION],
      )
    ).rows.map(toRow);
}

function toRow(row: { id: string; version: string; amount: number }): ReconcileRow {
  return { id: row.id, version: Number(row.version), fields: { amount: row.amount } };
}

async function settledEvents(env: LabEnv): Promise<number> {
  const { rows } = await env.pool.query<{ n: string }>(
    `SELECT (SELECT count(*) FROM "${env.schema}".inbox) + (SELECT count(*) FROM "${env.schema}".parked) AS n`,
  );
  return Number(rows[0]!.n);
}

function idsIn(report: ReconcileReport): string[] {
  return Object.values(report.samples).flat();
}

function total(report: ReconcileReport): number {
  return Object.values(report.differences).reduce((a, b) => a + b, 0);
}

process.exitCode = await main();
