import pg from 'pg';
import { connectionError, ServiceUnavailableError, ConnectionConfigError } from '../runtime/errors.js';
import {
  checkDatabaseUrl,
  classifyDatabaseError,
  failureFields,
  unknownFailure,
} from '../runtime/connection-failure.js';
import { databaseTarget, type ConnectionTarget } from '../runtime/connection-target.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { withoutPreparedStatements } from './statement.js';
import { failoverPool } from './failover-client.js';
import { parseHostList } from '../runtime/host-list.js';

export interface PoolLease {
  pool: pg.Pool;
  /** Ends the pool only if it was opened here; a caller's pool stays theirs. */
  release(): Promise<void>;
}

/**
 * The caller's pool if they passed one, otherwise a pool of our own whose idle-connection
 * errors are logged instead of ending the process. A connection string pg would misread
 * (`notaurl` becomes a host named "base") is refused here, before any connection.
 */
export function leasePool(
  given: pg.Pool | undefined,
  open: {
    connectionString?: string | undefined;
    max: number;
    applicationName: string;
    logger: Logger;
    /** 'transaction': the connections go through a transaction-mode pooler (no named statements). */
    poolMode?: 'session' | 'transaction';
  },
): PoolLease {
  if (given) {
    if (open.poolMode === 'transaction') withoutPreparedStatements(given);
    return { pool: given, release: async () => undefined };
  }
  if (open.connectionString !== undefined) assertDatabaseUrl(open.connectionString);
  const pool = newPool({
    connectionString: open.connectionString,
    max: open.max,
    application_name: open.applicationName,
  });
  if (open.poolMode === 'transaction') withoutPreparedStatements(pool);
  const target = poolTarget(pool);
  pool.on('error', (err) =>
    open.logger.warn(
      {
        ...describeError(err),
        ...failureFields(classifyDatabaseError(err, target) ?? unknownFailure('PostgreSQL', target, err)),
      },
      'idle database connection lost',
    ),
  );
  return { pool, release: () => pool.end() };
}

/** Where pools opened from a host list connect, for messages: every host, not only the first. */
const listTargets = new WeakMap<pg.Pool, ConnectionTarget>();

/**
 * A pg.Pool for `config`, which also reads libpq's host lists (`host1:5432,host2:5432` with
 * target_session_attrs) that node-postgres alone does not: its clients then connect to the first
 * suitable host (failover-client.ts). Check the URL with assertDatabaseUrl first.
 */
export function newPool(config: pg.PoolConfig): pg.Pool {
  const list = config.connectionString ? parseHostList(config.connectionString) : undefined;
  if (!list) return new pg.Pool(config);
  const pool = failoverPool(list, { ...config, connectionString: list.urlFor(list.hosts[0]!) });
  listTargets.set(pool, databaseTarget(config.connectionString!));
  return pool;
}

/** Throws ConnectionConfigError (CONVERGE_DATABASE_URL_INVALID) for a connection string pg cannot use as meant. */
export function assertDatabaseUrl(connectionString: string): void {
  const failure = checkDatabaseUrl(connectionString);
  if (failure) throw new ConnectionConfigError(failure);
}

/** Where a pool connects, for messages: from its connection string, else its host and port options. */
export function poolTarget(pool: pg.Pool): ConnectionTarget {
  const listed = listTargets.get(pool);
  if (listed) return listed;
  const options = (pool as { options?: pg.PoolConfig }).options ?? {};
  if (typeof options.connectionString === 'string') return databaseTarget(options.connectionString);
  const host = typeof options.host === 'string' ? options.host : 'localhost';
  return {
    endpoint: `${host}:${options.port ?? 5432}`,
    ...(typeof options.database === 'string' ? { name: options.database } : {}),
  };
}

/**
 * The typed error for a failed database call: ConnectionConfigError when retrying cannot help,
 * ServiceUnavailableError when the database is out of reach; anything else (a SQL error) as it was.
 */
export function databaseFailure(err: unknown, target: ConnectionTarget): unknown {
  if (err instanceof ConnectionConfigError || err instanceof ServiceUnavailableError) return err;
  const failure = classifyDatabaseError(err, target);
  return failure ? connectionError(failure, err) : err;
}

/**
 * databaseFailure for a read of converge's own schema, where a 42501 (insufficient privilege)
 * is a missing grant, so permanent: `denied` names what the role may not do and how to fix it.
 */
export function schemaReadFailure(
  err: unknown,
  target: ConnectionTarget,
  denied: { reason: string; hint: string },
): unknown {
  if ((err as { code?: unknown }).code !== '42501') return databaseFailure(err, target);
  return new ConnectionConfigError(
    {
      service: 'PostgreSQL',
      endpoint: target.endpoint,
      kind: 'access-denied',
      permanent: true,
      detail: '42501',
      ...denied,
    },
    { cause: err },
  );
}

/** True when the pool gets an answer to `SELECT 1` within `timeoutMs`: a readiness probe's database check. */
export async function pingDatabase(pool: pg.Pool, timeoutMs = 2_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([
      pool.query('SELECT 1').then(
        () => true,
        () => false,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
