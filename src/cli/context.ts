import type amqp from 'amqplib';
import { InvalidArgumentError, type Command } from 'commander';
import pg from 'pg';
import { createLogger } from '../runtime/logger.js';
import { onShutdownSignals } from '../runtime/sleep.js';
import { openConnection } from '../transport/connection.js';
import { databaseUrl, logLevel, LOCAL_AMQP_URL } from './env.js';

/** What every command reads from the program: the global flags, resolved when the command runs. */
export interface CommandContext {
  /** Connection strings are read here, at run time, so --help never prints a password from the environment. */
  globals(): { databaseUrl: string; schema: string };
}

export function commandContext(program: Command): CommandContext {
  return {
    globals() {
      const opts = program.opts<{ databaseUrl?: string; schema: string }>();
      return { databaseUrl: databaseUrl(opts.databaseUrl), schema: opts.schema };
    },
  };
}

export const AMQP_URL_HELP = `RabbitMQ URL (default: env AMQP_URL, else ${LOCAL_AMQP_URL})`;

/** commander argument parser for integer flags. */
export function integer(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed)) throw new InvalidArgumentError('not an integer');
  return parsed;
}

/** A one-connection pool for a short command, closed when `work` settles. */
export async function withPool<T>(databaseUrl: string, work: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, application_name: 'converge-cli' });
  try {
    return await work(pool);
  } finally {
    await pool.end();
  }
}

/**
 * A broker connection for a short command, through the library's openConnection so it carries a
 * connection name and the same socket options as relay and consumer; `work`'s end closes it.
 */
export async function withBroker<T>(
  url: string,
  name: string,
  work: (connection: amqp.ChannelModel) => Promise<T>,
): Promise<T> {
  const connection = await openConnection(
    url,
    `converge-cli ${name}`,
    createLogger('converge-cli', logLevel()),
    () => undefined,
  );
  try {
    return await work(connection);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Resolves on the first SIGTERM or SIGINT: long-running commands stop gracefully on either. */
export function untilShutdownSignal(): Promise<void> {
  return new Promise((resolve) => {
    onShutdownSignals(async () => resolve());
  });
}
