import pg from 'pg';
import { describeError, type Logger } from '../runtime/logger.js';

export interface PoolLease {
  pool: pg.Pool;
  /** Ends the pool only if it was opened here; a caller's pool stays theirs. */
  release(): Promise<void>;
}

/**
 * The caller's pool if they passed one, otherwise a pool of our own whose idle-connection
 * errors are logged instead of ending the process.
 */
export function leasePool(
  given: pg.Pool | undefined,
  open: { connectionString?: string | undefined; max: number; applicationName: string; logger: Logger },
): PoolLease {
  if (given) return { pool: given, release: async () => undefined };
  const pool = new pg.Pool({
    connectionString: open.connectionString,
    max: open.max,
    application_name: open.applicationName,
  });
  pool.on('error', (err) => open.logger.warn(describeError(err), 'idle database connection lost'));
  return { pool, release: () => pool.end() };
}
