import type pg from 'pg';
import { CommitRolledBackError } from '../runtime/errors.js';

/** SQLSTATEs after which the whole local transaction may simply be run again. */
const RETRY_WHOLE_TRANSACTION = new Set(['40001', '40P01']);

/**
 * Thrown by converge's own code inside a transaction when what it read was overtaken by a
 * concurrent transaction (the same situation as a serialization failure, detected by
 * converge rather than by PostgreSQL): withTransaction runs the whole transaction again.
 */
export class RetryTransactionSignal extends Error {
  override readonly name = 'RetryTransactionSignal';
}

export function isSerializationFailure(err: unknown): boolean {
  if (err instanceof RetryTransactionSignal) return true;
  return (
    typeof err === 'object' && err !== null && RETRY_WHOLE_TRANSACTION.has(String((err as { code?: unknown }).code))
  );
}

/**
 * A partitioned inbox with no partition for now (23514 naming the table, no constraint): the partitions
 * ahead ran out, a state of the database that a relay or `converge maintain` ends, not a fact about the
 * event. The consumer waits it out as an outage instead of counting attempts towards quarantine.
 */
function isInboxWithoutPartition(err: unknown, code: string): boolean {
  const fields = err as { table?: unknown; constraint?: unknown };
  return code === '23514' && fields.table === 'inbox' && fields.constraint === undefined;
}

/**
 * Errors that say the database (or the road to it) is unavailable rather than that the
 * statement is wrong: connection failures, admin shutdown, too many connections, an inbox
 * without a partition for now.
 */
export function isTransientDatabaseError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const raw = (err as { code?: unknown }).code;
  const code = typeof raw === 'string' || typeof raw === 'number' ? String(raw) : '';
  if (isSerializationFailure(err)) return true;
  if (isInboxWithoutPartition(err, code)) return true;
  if (code.startsWith('08') || code.startsWith('53') || code.startsWith('57P')) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true;
  const message = (err as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    /Connection terminated|connection timeout|Client has encountered a connection error/i.test(message)
  );
}

/**
 * Ends the transaction open on `client` with COMMIT. PostgreSQL answers COMMIT on a transaction
 * that an earlier (caught) error aborted with the command tag ROLLBACK and no error, so the tag
 * is the only sign that nothing was written: that answer throws CommitRolledBackError.
 */
export async function commit(client: Pick<pg.ClientBase, 'query'>): Promise<void> {
  const result = await client.query('COMMIT');
  if (result.command === 'ROLLBACK') throw new CommitRolledBackError();
}

/**
 * Runs `work` in one transaction on one pooled connection. Serialization failures,
 * deadlocks and a RetryTransactionSignal re-run the whole transaction (never a single statement), up to `retries` times.
 * A COMMIT that PostgreSQL answers with ROLLBACK (`work` caught an SQL error) rejects with
 * CommitRolledBackError and is not re-run: the same work would catch the same error again.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  retries = 3,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await inTransaction(pool, work, commit);
    } catch (err) {
      if (attempt < retries && isSerializationFailure(err)) continue;
      throw err;
    }
  }
}

/**
 * Runs `work` in one transaction that always ends with ROLLBACK: for reads (a snapshot of the
 * source), where there is nothing to commit, so an error `work` caught and handled itself
 * does not turn a finished read into a failure.
 */
export function withReadTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return inTransaction(pool, work, (client) => client.query('ROLLBACK').then(() => undefined));
}

async function inTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  end: (client: pg.PoolClient) => Promise<void>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // pg-pool listens for errors only on idle clients; a checked-out client whose backend dies
  // would otherwise raise an uncaught 'error' and take the process down.
  const onError = (err: Error) => {
    broken ??= err;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await end(client);
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackErr) {
      broken = rollbackErr as Error;
    }
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
