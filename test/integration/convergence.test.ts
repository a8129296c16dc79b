/**
 * The convergence property over random histories, against the real PostgreSQL: whatever the
 * order, duplicates, redeliveries, late events, interleaved snapshots and reconciler repairs
 * running next to two consumers, once everything is delivered the projection equals the
 * source for every aggregate, and no event's effect is written twice. fast-check prints the
 * seed and the shrunk history of a failing run; `FC_SEED=<seed> npm test` replays it.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  applyIncrement,
  applySnapshot,
  reconcile,
  silentLogger,
  type EventEnvelope,
  type EventHandler,
} from '../../src/index.js';
import { DeliveryProcessor } from '../../src/internal/index.js';
import { after, before, describe, it, createTestSchema, type TestDatabase, deliveryOf } from '../support/rig.js';

const PROJECTION = 'totals';
const RUNS = Number(process.env.FC_RUNS ?? 100);

interface SourceEvent {
  aggregateId: string;
  version: number;
  delta: number;
  /** Also published as a full snapshot at this version. */
  snapshot: boolean;
}

/** A source history: per aggregate, versions 1..n with their deltas; some versions also as snapshots. */
const historyArb = fc
  .array(
    fc.array(fc.record({ delta: fc.integer({ min: 1, max: 9 }), snapshot: fc.boolean() }), {
      minLength: 1,
      maxLength: 6,
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((aggregates) =>
    aggregates.flatMap((steps, a) =>
      steps.map((step, i) => ({
        aggregateId: `a${a}`,
        version: i + 1,
        delta: step.delta,
        snapshot: step.snapshot && i > 0,
      })),
    ),
  );

/** What the consumers receive: every event at least once (some twice), shuffled; some snapshot copies; a repair now and then. */
function deliveryPlanArb(history: SourceEvent[]) {
  const items = history.flatMap((e) => [
    { kind: 'incremental' as const, event: e },
    ...(e.snapshot ? [{ kind: 'snapshot' as const, event: e }] : []),
  ]);
  return fc
    .record({
      order: fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }),
      duplicates: fc.array(fc.nat({ max: items.length - 1 }), { maxLength: 4 }),
      repairAt: fc.option(fc.nat({ max: items.length }), { nil: undefined }),
      lost: fc.option(fc.nat({ max: history.length - 1 }), { nil: undefined }),
    })
    .map((plan) => ({ ...plan, items }));
}

function totalUpTo(history: SourceEvent[], aggregateId: string, version: number): number {
  return history
    .filter((e) => e.aggregateId === aggregateId && e.version <= version)
    .reduce((sum, e) => sum + e.delta, 0);
}

function envelopeOf(
  history: SourceEvent[],
  item: { kind: 'incremental' | 'snapshot'; event: SourceEvent },
): EventEnvelope {
  const { event } = item;
  const base = {
    aggregateType: 'order',
    aggregateId: event.aggregateId,
    aggregateVersion: event.version,
    schemaVersion: 1,
    occurredAt: '2026-12-02T00:00:00.000Z',
  };
  return item.kind === 'incremental'
    ? {
        ...base,
        eventId: `${event.aggregateId}-${event.version}`,
        eventType: 'Added',
        kind: 'incremental',
        payload: { delta: event.delta },
      }
    : {
        ...base,
        eventId: `${event.aggregateId}-${event.version}-snap`,
        eventType: 'Totals',
        kind: 'snapshot',
        payload: { total: totalUpTo(history, event.aggregateId, event.version) },
      };
}

const delivery = (envelope: EventEnvelope) => deliveryOf(envelope, { routingKey: 'order.any', redelivered: false });

describe('convergence over random histories', () => {
  let db: TestDatabase;
  let q: string;
  let consumers: DeliveryProcessor[];

  before(async () => {
    db = await createTestSchema('cvp');
    q = `"${db.schema}"`;
    await db.pool.query(`CREATE TABLE ${q}.totals (id text PRIMARY KEY, total integer NOT NULL)`);
    // One row per written effect; an effect written twice shows up as a repeated event_id.
    await db.pool.query(`CREATE TABLE ${q}.written_effects (event_id text NOT NULL)`);
    const handlers: Record<string, EventHandler> = {
      Added: async (event, { tx }) => {
        await applyIncrement(tx, { projection: PROJECTION, event, schema: db.schema }, async () => {
          const written = await tx.query(
            `INSERT INTO ${q}.totals (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = totals.total + $2`,
            [event.aggregateId, (event.payload as { delta: number }).delta],
          );
          await tx.query(`INSERT INTO ${q}.written_effects (event_id) VALUES ($1)`, [event.eventId]);
          return written;
        });
      },
      Totals: async (event, { tx }) => {
        await applySnapshot(tx, { projection: PROJECTION, event, schema: db.schema }, async () => {
          const written = await tx.query(
            `INSERT INTO ${q}.totals (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = $2`,
            [event.aggregateId, (event.payload as { total: number }).total],
          );
          await tx.query(`INSERT INTO ${q}.written_effects (event_id) VALUES ($1)`, [event.eventId]);
          return written;
        });
      },
    };
    const options = {
      consumer: 'totals',
      pool: db.pool,
      schema: db.schema,
      logger: silentLogger,
      handlers,
      maxAttempts: 1_000,
    };
    consumers = [new DeliveryProcessor(options), new DeliveryProcessor(options)];
  });

  after(async () => {
    for (const consumer of consumers) await consumer.close();
    await db.close();
  });

  it(`the projection equals the source and no effect is written twice (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        historyArb.chain((history) => deliveryPlanArb(history).map((plan) => ({ history, plan }))),
        async ({ history, plan }) => {
          await db.pool.query(
            `TRUNCATE ${q}.totals, ${q}.written_effects, ${q}.inbox, ${q}.parked, ${q}.projection_state, ${q}.quarantine`,
          );
          const queue = [...plan.order, ...plan.duplicates.map((i) => plan.items[i]!)]
            // A lost event never reaches the consumers; only the reconciler can bring its effect in.
            .filter((item) => plan.lost === undefined || item.kind === 'snapshot' || item.event !== history[plan.lost]);
          const source = async (afterId: string | null) => {
            const ids = [...new Set(history.map((e) => e.aggregateId))]
              .sort()
              .filter((id) => afterId === null || id > afterId);
            return ids.map((id) => {
              const version = Math.max(...history.filter((e) => e.aggregateId === id).map((e) => e.version));
              return { id, version, fields: {} };
            });
          };
          const repair = () =>
            reconcile(db.pool, {
              schema: db.schema,
              projection: PROJECTION,
              aggregateType: 'order',
              source,
              repair: {
                apply: async (tx, row) =>
                  void (await tx.query(
                    `INSERT INTO ${q}.totals (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = $2`,
                    [row.id, totalUpTo(history, row.id, row.version)],
                  )),
              },
            });
          // Two consumers take deliveries off one queue; a retry goes to the back (the retry queue).
          let taken = 0;
          let repairing: Promise<unknown> = Promise.resolve();
          const worker = async (consumer: DeliveryProcessor) => {
            for (let next = queue.shift(); next; next = queue.shift()) {
              if (plan.repairAt !== undefined && taken++ === plan.repairAt) repairing = repair();
              const settlement = await consumer.process(delivery(envelopeOf(history, next)));
              assert.notEqual(
                settlement.action === 'ack' && settlement.outcome,
                'quarantined',
                `nothing in a valid history is quarantined (${JSON.stringify(settlement)})`,
              );
              if (settlement.action === 'retry') queue.push(next);
            }
          };
          await Promise.all(consumers.map(worker));
          await repairing;
          // Quiescence: a lost event is closed by the reconciler; parked events then drain.
          if (plan.lost !== undefined) await repair();
          for (const consumer of consumers) await consumer.drainReady();

          const totals = new Map(
            (await db.pool.query<{ id: string; total: number }>(`SELECT id, total FROM ${q}.totals`)).rows.map((r) => [
              r.id,
              r.total,
            ]),
          );
          const versions = new Map(
            (
              await db.pool.query<{ aggregate_id: string; version: string }>(
                `SELECT aggregate_id, version FROM ${q}.projection_state`,
              )
            ).rows.map((r) => [r.aggregate_id, Number(r.version)]),
          );
          for (const id of new Set(history.map((e) => e.aggregateId))) {
            const finalVersion = Math.max(...history.filter((e) => e.aggregateId === id).map((e) => e.version));
            assert.equal(versions.get(id), finalVersion, `${id} at the source's version`);
            assert.equal(totals.get(id), totalUpTo(history, id, finalVersion), `${id} equals the source`);
          }
          const twice = await db.pool.query(
            `SELECT event_id FROM ${q}.written_effects GROUP BY event_id HAVING count(*) > 1`,
          );
          assert.deepEqual(twice.rows, [], 'no effect written twice');
          assert.equal(
            Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.parked`)).rows[0]?.n),
            0,
            'nothing left parked',
          );
        },
      ),
      { numRuns: RUNS, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}) },
    );
  });
});
