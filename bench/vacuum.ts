/**
 * Vacuum pressure (issue 29): the relay's drain and the consumer's apply with the xmin horizon pinned
 * by a transaction held open on the same database for the whole run (a forgotten session or a long
 * report does that), beside the same run without it. While the horizon is pinned vacuum removes no
 * row version the run leaves behind: the relay's claims and marks, the consumer's inbox and version
 * rows. The figures: each rate, pinned against unpinned, and the dead tuples each run left.
 */
import type pg from 'pg';
import type { BenchContext } from './env.js';

/**
 * Runs `work` while another connection holds a REPEATABLE READ snapshot: its backend_xmin stays
 * where it was when the run began, as pg_stat_activity shows, until `work` ends.
 */
export async function withPinnedHorizon<T>(ctx: BenchContext, work: () => Promise<T>): Promise<T> {
  const client = await ctx.pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await client.query('SELECT 1');
    const { rows } = await client.query<{ xmin: string | null }>(
      'SELECT backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = pg_backend_pid()',
    );
    if (rows[0]?.xmin == null) throw new Error('the pinning transaction holds no snapshot');
    return await work();
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

export interface DeadTuples {
  outbox: number;
  inbox: number;
  projectionState: number;
}

/** n_dead_tup of the run's converge tables, as the cumulative statistics last saw them. */
export async function deadTuples(pool: pg.Pool, schema: string): Promise<DeadTuples> {
  const { rows } = await pool.query<{ relname: string; n: string }>(
    `SELECT relname, n_dead_tup::text AS n FROM pg_stat_user_tables
      WHERE schemaname = $1 AND relname IN ('outbox', 'inbox', 'projection_state')`,
    [schema],
  );
  const of = (name: string) => Number(rows.find((row) => row.relname === name)?.n ?? 0);
  return { outbox: of('outbox'), inbox: of('inbox'), projectionState: of('projection_state') };
}
