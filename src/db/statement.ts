import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Executor, QueryResultLike } from './executor.js';

let prepare = true;

/**
 * Turns server-side prepared statements off (or on again) for every statement converge runs.
 * They are on by default; turn them off behind PgBouncer older than 1.21 in transaction
 * pooling mode, which cannot keep a prepared statement on the server connection.
 */
export function usePreparedStatements(enabled: boolean): void {
  prepare = enabled;
}

/** Pools (and the clients they hand out) whose connections go through a transaction-mode pooler. */
const unprepared = new WeakSet<object>();

/**
 * Runs converge's statements on `pool` as plain text from now on: on the pool and on every client it
 * hands out after this call (call it before the first checkout). Behind a pooler in transaction mode
 * the next transaction may reach a server connection that never saw the name. Statements you run
 * yourself are not affected. Idempotent.
 */
export function withoutPreparedStatements(pool: pg.Pool): void {
  if (unprepared.has(pool)) return;
  unprepared.add(pool);
  pool.on('acquire', (client) => unprepared.add(client));
}

const names = new Map<string, string>();

/** Stable per text, so the same statement for another schema gets a name of its own. */
function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `converge_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * Runs one of converge's own statements. On a node-postgres client or pool it is a named
 * statement, parsed and planned once per connection: the relay and consumer run a handful
 * of statements thousands of times a second, and at small batches planning was a large
 * share of PostgreSQL's CPU. Any other executor (an ORM adapter) gets plain text.
 */
export function runStatement<R>(executor: Executor, text: string, values: unknown[]): Promise<QueryResultLike<R>> {
  if (prepare && (executor instanceof pg.Client || executor instanceof pg.Pool) && !unprepared.has(executor)) {
    return (executor as pg.Pool).query<R & pg.QueryResultRow>({ name: statementName(text), text, values });
  }
  return executor.query<R>(text, values);
}
