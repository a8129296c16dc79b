// test-files: session, counts each component's backends in pg_stat_activity by application_name
/**
 * The connection budget of docs/deployment.md, measured: while a polling relay (lease and exclusive
 * claims) and a consumer drain a backlog, the server connections each holds, counted in
 * pg_stat_activity by an application_name of the test's own (a connection string's application_name
 * wins over the one converge sets), never exceed what the page states: `concurrency + 1` for a relay,
 * 4 for a consumer.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { appendManyToOutbox, withTransaction } from '../../src/index.js';
import { withInProcessFixture } from '../support/in-process-fixture.js';
import { DATABASE_URL, describe, it, uniqueName, waitFor } from '../support/rig.js';

const EVENTS = 3_000;

function urlNamed(applicationName: string): string {
  const url = new URL(DATABASE_URL);
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/** Counts the connections of each name until stopped; the most seen at once, per name. */
function watchConnections(pool: pg.Pool, names: string[]): { stop(): Promise<Record<string, number>> } {
  const most = Object.fromEntries(names.map((name) => [name, 0]));
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await pool.query<{ name: string; n: number }>(
        `SELECT application_name AS name, count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = ANY($1::text[]) GROUP BY 1`,
        [names],
      );
      for (const row of rows) most[row.name] = Math.max(most[row.name] ?? 0, row.n);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
}

describe('connection budget', () => {
  for (const claim of ['lease', 'exclusive'] as const) {
    it(`${claim === 'lease' ? 'a lease' : 'an exclusive'} relay holds at most concurrency + 1 connections and a consumer at most 4 while they drain ${EVENTS} events`, () =>
      withInProcessFixture('cvt_budget', async ({ db, exchange, startConsumer, startRelay }) => {
        const relayName = uniqueName('budget_relay');
        const consumerName = uniqueName('budget_consumer');
        const concurrency = 3;
        const consumer = startConsumer({
          queue: `${exchange}.all`,
          bindings: ['#'],
          queueType: 'classic',
          connectionString: urlNamed(consumerName),
          handlers: { '*': async () => undefined },
        });
        const relay = startRelay({ connectionString: urlNamed(relayName), claim, concurrency, batchSize: 100 });
        await consumer.ready({ timeoutMs: 10_000 });
        await relay.ready({ timeoutMs: 10_000 });
        const watch = watchConnections(db.pool, [relayName, consumerName]);
        await withTransaction(db.pool, (tx) =>
          appendManyToOutbox(
            tx,
            Array.from({ length: EVENTS }, (_, i) => ({
              aggregateType: 'order',
              aggregateId: `o${i % 50}`,
              aggregateVersion: Math.floor(i / 50) + 1,
              eventType: 'OrderChanged',
              payload: {},
            })),
            { schema: db.schema },
          ),
        );
        await waitFor(() => consumer.stats.applied === EVENTS || undefined, `${EVENTS} events applied`, 60_000);
        const most = await watch.stop();
        assert.ok(most[relayName]! >= 1, 'the relay was seen connected');
        assert.ok(most[consumerName]! >= 1, 'the consumer was seen connected');
        assert.ok(most[relayName]! <= concurrency + 1, `relay held ${most[relayName]} connections`);
        assert.ok(most[consumerName]! <= 4, `consumer held ${most[consumerName]} connections`);
      }));
  }
});
