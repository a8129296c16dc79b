/** What the failover tests share: appending through a failover whose outcome a failed COMMIT leaves unknown. */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { appendToOutbox, withTransaction } from '../../src/index.js';

/** Reconnect quickly: a failover test waits for the promoted standby, not for a production backoff. */
export const FAST_BACKOFF = { initialDelayMs: 50, maxDelayMs: 500, factor: 2 };

/**
 * Appends one OrderChanged event until it is committed. A failure during the failover leaves it
 * unknown whether the COMMIT took, so the outbox on whichever server now accepts writes decides:
 * present means committed. Returns the eventId.
 */
export async function appendUntilCommitted(
  pool: pg.Pool,
  schema: string,
  aggregateId: string,
  version: number,
): Promise<string> {
  for (let tries = 0; ; tries++) {
    try {
      return await withTransaction(pool, async (tx) => {
        const done = await tx.query<{ event_id: string }>(
          `SELECT event_id FROM "${schema}".outbox WHERE aggregate_id = $1 AND aggregate_version = $2`,
          [aggregateId, version],
        );
        if (done.rows[0]) return done.rows[0].event_id;
        const event = {
          aggregateType: 'order',
          aggregateId,
          aggregateVersion: version,
          eventType: 'OrderChanged',
          payload: {},
        };
        return (await appendToOutbox(tx, event, { schema })).eventId;
      });
    } catch (err) {
      assert.ok(tries < 600, `the append never went through: ${(err as Error).message}`);
      // The next attempt opens a new connection, which the host list sends to a writable server.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
