// test-files: group cdc-server, uses the logical-replication server (its slots)
/**
 * The CDC relay's line of docs/deployment.md's connection budget, measured: while it streams and
 * marks a backlog, its server connections (the replication connection and its pool of 2 for marks
 * and checks), counted in pg_stat_activity by an application_name of the test's own, never exceed 3.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { appendManyToOutbox, withTransaction } from '../../src/index.js';
import { withCdcRig } from '../support/cdc-fixture.js';
import { test, uniqueName, waitFor } from '../support/rig.js';

const EVENTS = 2_000;

function urlNamed(databaseUrl: string, applicationName: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/** The most connections of `name` seen at once, sampled until stopped; and whether a walsender was among them. */
function watchConnections(pool: pg.Pool, name: string): { stop(): Promise<{ most: number; walsender: boolean }> } {
  let most = 0;
  let walsender = false;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await pool.query<{ n: number; walsenders: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE backend_type = 'walsender')::int AS walsenders
           FROM pg_stat_activity WHERE application_name = $1`,
        [name],
      );
      most = Math.max(most, rows[0]!.n);
      walsender ||= rows[0]!.walsenders > 0;
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { most, walsender };
    },
  };
}

test(`the CDC relay holds at most 3 connections (replication + a pool of 2) while it relays ${EVENTS} events`, () =>
  withCdcRig(async (rig) => {
    const name = uniqueName('budget_cdc');
    await rig.createSlot();
    const relay = rig.started({ connectionString: urlNamed(rig.databaseUrl, name) });
    await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
    const watch = watchConnections(rig.pool, name);
    await withTransaction(rig.pool, (tx) =>
      appendManyToOutbox(
        tx,
        Array.from({ length: EVENTS }, (_, i) => ({
          aggregateType: 'order',
          aggregateId: `o${i % 40}`,
          aggregateVersion: Math.floor(i / 40) + 1,
          eventType: 'OrderChanged',
          payload: {},
        })),
        { schema: rig.schema },
      ),
    );
    await waitFor(
      async () => {
        const { rows } = await rig.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${rig.schema}".outbox WHERE status = 'published'`,
        );
        return rows[0]!.n === EVENTS;
      },
      `${EVENTS} events marked published`,
      60_000,
    );
    const { most, walsender } = await watch.stop();
    assert.ok(walsender, 'the replication connection was seen under the test name');
    assert.ok(most >= 2, `the relay was seen with its replication and a pooled connection (${most})`);
    assert.ok(most <= 3, `the CDC relay held ${most} connections`);
  }));
