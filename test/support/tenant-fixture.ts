/**
 * What the tenant tests share: a projection that records each event with the tenant its payload
 * names, and the query that finds rows of a tenant that did not come from its own outbox.
 */
import type pg from 'pg';
import type { EventEnvelope, HandlerContext } from '../../src/index.js';

/** The projection write: the event's id and the tenant its payload says it came from (`origin`). */
export function recordOrigin(schema: string) {
  return async (event: EventEnvelope, ctx: HandlerContext) => {
    await ctx.tx.query(`INSERT INTO "${schema}".seen (event_id, origin) VALUES ($1, $2)`, [
      event.eventId,
      (event.payload as { origin: string }).origin,
    ]);
  };
}

/** The `seen` table recordOrigin writes to. */
export async function createSeenTable(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`CREATE TABLE "${schema}".seen (event_id uuid PRIMARY KEY, origin text NOT NULL)`);
}

export interface ForeignRows {
  /** Projection rows from another tenant or from no outbox of this one. */
  seen: number;
  /** Inbox rows without an outbox row of this tenant. */
  inbox: number;
  /** Projection rows in all. */
  applied: number;
}

/** Rows of `schema`'s projection and inbox that did not come from its own outbox (0 when isolated). */
export async function foreignRows(pool: pg.Pool, schema: string, origin: string): Promise<ForeignRows> {
  const { rows } = await pool.query<ForeignRows>(
    `SELECT (SELECT count(*)::int FROM "${schema}".seen s
              WHERE s.origin <> $1 OR NOT EXISTS (SELECT 1 FROM "${schema}".outbox o WHERE o.event_id::text = s.event_id::text)) AS seen,
            (SELECT count(*)::int FROM "${schema}".inbox i
              WHERE NOT EXISTS (SELECT 1 FROM "${schema}".outbox o WHERE o.event_id::text = i.event_id::text)) AS inbox,
            (SELECT count(*)::int FROM "${schema}".seen) AS applied`,
    [origin],
  );
  return rows[0]!;
}
