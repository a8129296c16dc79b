/**
 * What the live view and the final check read: pipeline counters from converge's tables, and the
 * differences between the source (`orders`) and each read model.
 */
import type pg from 'pg';
import { table } from './store.js';

export interface Pipeline {
  pending: number;
  published: number;
  /** Events each consumer handled (inbox rows) and how many were written for it. */
  search: { applied: number; written: number };
  statistics: { applied: number; written: number };
}

export async function readPipeline(
  pool: pg.Pool,
  schema: string,
  queues: { search: string; statistics: string },
): Promise<Pipeline> {
  const { rows } = await pool.query<Record<string, string>>(
    `SELECT count(*) FILTER (WHERE status <> 'published') AS pending,
            count(*) FILTER (WHERE status = 'published') AS published,
            count(*) FILTER (WHERE aggregate_type = 'order-card') AS cards,
            count(*) FILTER (WHERE aggregate_type = 'order') AS changes,
            (SELECT count(*) FROM ${table(schema, 'inbox')} WHERE consumer = $1) AS search,
            (SELECT count(*) FROM ${table(schema, 'inbox')} WHERE consumer = $2) AS statistics
       FROM ${table(schema, 'outbox')}`,
    [queues.search, queues.statistics],
  );
  const n = (key: string) => Number(rows[0]![key]);
  return {
    pending: n('pending'),
    published: n('published'),
    search: { applied: n('search'), written: n('cards') },
    statistics: { applied: n('statistics'), written: n('changes') },
  };
}

export interface Differences {
  orders: number;
  search: number;
  statistics: number;
}

/** Rows where a read model and the source disagree; a status row at 0 orders equals no row. */
export async function readDifferences(pool: pg.Pool, schema: string): Promise<Differences> {
  const { rows } = await pool.query<Record<string, string>>(
    `WITH source AS (SELECT status, count(*) AS orders, sum(amount) AS amount FROM ${table(schema, 'orders')} GROUP BY status)
     SELECT (SELECT count(*) FROM ${table(schema, 'orders')}) AS orders,
            (SELECT count(*) FROM ${table(schema, 'orders')} o FULL JOIN ${table(schema, 'order_search')} s USING (id)
              WHERE (o.customer, o.status, o.amount) IS DISTINCT FROM (s.customer, s.status, s.amount)) AS search,
            (SELECT count(*) FROM source FULL JOIN ${table(schema, 'status_totals')} t USING (status)
              WHERE (coalesce(source.orders, 0), coalesce(source.amount, 0))
                    IS DISTINCT FROM (coalesce(t.orders, 0), coalesce(t.amount, 0))) AS statistics`,
  );
  const n = (key: string) => Number(rows[0]![key]);
  return { orders: n('orders'), search: n('search'), statistics: n('statistics') };
}

export function converged(pipeline: Pipeline, differences: Differences): boolean {
  return (
    pipeline.pending === 0 &&
    pipeline.search.applied === pipeline.search.written &&
    pipeline.statistics.applied === pipeline.statistics.written &&
    differences.search === 0 &&
    differences.statistics === 0
  );
}

/** One line of the live view. */
export function formatPipeline(seconds: number, written: number, p: Pipeline): string {
  const lag = Math.max(p.search.written - p.search.applied, p.statistics.written - p.statistics.applied);
  return (
    `${seconds.toFixed(0).padStart(3)} s  orders written ${written}  outbox pending ${p.pending}  ` +
    `published ${p.published}  applied: search ${p.search.applied}, statistics ${p.statistics.applied}  lag ${lag} events`
  );
}
