import { InvalidArgumentError, type Command } from 'commander';
import pg from 'pg';
import { assertDatabaseUrl, databaseFailure, newPool, poolTarget } from '../db/pool.js';
import { withoutPreparedStatements } from '../db/statement.js';
import { ConfigError } from '../runtime/errors.js';
import { createLogger } from '../runtime/logger.js';
import { onShutdownSignals } from '../runtime/sleep.js';
import { checkSchema } from '../schema/migrate.js';
import { RabbitMqTransport } from '../transport/rabbitmq.js';
import type { TransportConnection } from '../transport/transport.js';
import { databaseUrl, logLevel, LOCAL_AMQP_URL } from './env.js';
import { withConnection } from '../transport/short-lived.js';

/** What every command reads from the program: the global flags, resolved when the command runs. */
export interface CommandContext {
  /**
   * Connection strings are read here, at run time, so --help never prints a password from the environment.
   * `--schema a,b,c` (tenants) only where the command says `several`; `schema` is then the first.
   */
  globals(options?: { several?: boolean }): {
    databaseUrl: string;
    schema: string;
    schemas: string[];
    poolMode: PoolMode;
  };
}

/** How DATABASE_URL reaches PostgreSQL (the library's poolMode option). */
export type PoolMode = 'session' | 'transaction';

export function commandContext(program: Command): CommandContext {
  return {
    globals(options = {}) {
      const opts = program.opts<{ databaseUrl?: string; schema: string; poolMode: PoolMode }>();
      const schemas = opts.schema.split(',').map((name) => name.trim());
      if (schemas.length > 1 && !options.several)
        throw new ConfigError('schema', 'names several schemas; only relay and status take a list (one per tenant)');
      const url = databaseUrl(opts.databaseUrl);
      return { databaseUrl: url, schema: schemas[0]!, schemas, poolMode: opts.poolMode };
    },
  };
}

export const AMQP_URL_HELP = `RabbitMQ URL, or a cluster's node URLs separated by commas (default: env AMQP_URL, else ${LOCAL_AMQP_URL}, said on stderr)`;

/** commander argument parser for integer flags. */
export function integer(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed)) throw new InvalidArgumentError('not an integer');
  return parsed;
}

const DIGITS = /^\d{1,15}$/;

/** Counts and sizes: 1, 2, 3, … (checked before anything connects). */
export function positiveInteger(value: string): number {
  if (!DIGITS.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a positive integer');
  return Number(value);
}

/** 0, 1, 2, … */
export function nonNegativeInteger(value: string): number {
  if (!DIGITS.test(value)) throw new InvalidArgumentError('must be an integer of 0 or more');
  return Number(value);
}

/** A TCP port, 0 (any free port) to 65535. */
export function port(value: string): number {
  if (!DIGITS.test(value) || Number(value) > 65_535) throw new InvalidArgumentError('must be a port, 0 to 65535');
  return Number(value);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration in ms: `1500` (plain ms), `1500ms`, `30s`, `5m`, `2h`, `7d`; never negative. */
export function duration(value: string): number {
  const match = /^(\d{1,15})(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError('must be a duration: milliseconds, or a number with ms, s, m, h or d');
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 'ms']!;
  if (!Number.isSafeInteger(ms)) throw new InvalidArgumentError('duration too long');
  return ms;
}

/** A quarantine row id (a bigserial): checked so `dlq show abc` never reaches PostgreSQL. */
export function quarantineId(value: string): string {
  if (!/^[1-9]\d{0,18}$/.test(value) || BigInt(value) > 9_223_372_036_854_775_807n)
    throw new InvalidArgumentError('must be a quarantine id (a positive integer, see `converge dlq list`)');
  return value;
}

/** commander's collector for a variadic id argument, each checked by `parse`. */
export function each<T>(parse: (value: string) => T): (value: string, previous?: T[]) => T[] {
  return (value, previous = []) => [...previous, parse(value)];
}

/**
 * A one-connection pool for a short command, closed when `work` settles. The URL is checked
 * before anything connects; with `schema`, the schema's migration is checked first, so an
 * unmigrated schema says "run `converge migrate`" instead of a raw 42P01. Connection failures
 * come out typed, naming PostgreSQL, host:port and the cause.
 */
export async function withPool<T>(
  target: { databaseUrl: string; schema?: string; poolMode?: PoolMode },
  work: (pool: pg.Pool) => Promise<T>,
): Promise<T> {
  const pool = openPool(target.databaseUrl, 1, 'converge-cli', target.poolMode);
  try {
    if (target.schema !== undefined) await checkSchema(pool, target.schema);
    return await work(pool);
  } catch (err) {
    throw databaseFailure(err, poolTarget(pool));
  } finally {
    await pool.end();
  }
}

/** A pool for a CLI command; the URL is checked first, and a lost idle connection does not crash the process. */
export function openPool(
  databaseUrl: string,
  max: number,
  applicationName: string,
  poolMode: PoolMode = 'session',
): pg.Pool {
  assertDatabaseUrl(databaseUrl);
  const pool = newPool({ connectionString: databaseUrl, max, application_name: applicationName });
  pool.on('error', () => undefined);
  if (poolMode === 'transaction') withoutPreparedStatements(pool);
  return pool;
}

/**
 * A broker connection for a short command, through the RabbitMQ transport so it carries a
 * connection name and the same failover and typed failures as relay and consumer; `work`'s end closes it.
 */
export async function withBroker<T>(
  url: string | readonly string[],
  name: string,
  work: (connection: TransportConnection) => Promise<T>,
): Promise<T> {
  const transport = new RabbitMqTransport({ urls: url, logger: createLogger('converge-cli', logLevel()) });
  return withConnection(transport, `converge-cli ${name}`, work);
}

/** Resolves on the first SIGTERM or SIGINT: long-running commands stop gracefully on either. */
export function untilShutdownSignal(): Promise<void> {
  return new Promise((resolve) => {
    onShutdownSignals(async () => resolve());
  });
}
