/**
 * The reorder buffer when PostgreSQL goes away between a commit and the drain that follows it
 * (found by `npm run chaos -- --pg embedded`, PG restarts): the committed batch is redelivered
 * as duplicates, and those must still drain the successors their first delivery left parked.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { withEnv, envelope, applyOrder } from '../support/consumer-env.js';
import { describe, test, waitFor } from '../support/rig.js';

/** Makes the next query whose text contains `needle` fail as a terminated backend would; returns how to undo it. */
function failNextQuery(pool: pg.Pool, needle: string, armed: { on: boolean }): () => void {
  const original = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as { query: unknown }).query = (...args: unknown[]) => {
    const first = args[0];
    const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
    if (armed.on && text.includes(needle)) {
      armed.on = false;
      return Promise.reject(
        Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      );
    }
    return original(...args);
  };
  return () => void ((pool as { query: unknown }).query = original);
}

describe('reorder buffer during a database outage', () => {
  test('a batch whose drain failed after its commit drains its parked successors when it comes back as duplicates', async () => {
    await withEnv(async (env) => {
      const armed = { on: false };
      // The drain check after a commit: which aggregates that just moved have parked successors.
      const restore = failNextQuery(env.pool, 'unnest($2::text[], $3::text[], $4::bigint[])', armed);
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await waitFor(async () => (await env.count(`SELECT count(*) AS n FROM $schema.parked`)) === 1, 'E2 parked');
        armed.on = true;
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => !armed.on, 'the drain after E1 committed failed');
        await waitFor(
          async () => (await env.count(`SELECT count(*) AS n FROM $schema.parked`)) === 0,
          'E2 drained after E1 came back as a duplicate',
        );
        const { rows } = await env.pool.query<{ event_id: string }>(
          `SELECT event_id FROM "${env.schema}".applied ORDER BY seq`,
        );
        assert.deepEqual(
          rows.map((r) => r.event_id),
          ['E1', 'E2'],
          'each applied once, in order',
        );
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 2);
      } finally {
        await env.stop(consumer);
        restore();
      }
    });
  });
});
