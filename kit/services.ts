/**
 * Service plumbing shared by the tests, the lab, the bench, chaos and the drift scenario:
 * the one place for the default URLs, the "service missing: how to start it" messages,
 * unique names and broker teardown. It imports nothing from node:test, so tools can use it.
 *
 * Every name, schema and pool made here is reported to `registry`; the test rig listens
 * there to clean up after each test and to prove after each file that nothing leaked.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import pg from 'pg';
import { DEFAULT_RETRY_TIERS_MS, retryTierQueueName } from '../src/transport/queue-arguments.js';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/**
 * PostgreSQL itself when DATABASE_URL is a transaction-mode pooler (scripts/pooler.ts sets it), for a test that
 * needs one session of its own beside the pooled ones; DATABASE_URL otherwise.
 */
export const DIRECT_DATABASE_URL = process.env.CONVERGE_TEST_DIRECT_DATABASE_URL ?? DATABASE_URL;
export const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
/**
 * A PostgreSQL with `wal_level=logical`, for the CDC relay's tests and bench. Locally a second
 * cluster beside the shared one (`npm run services` creates it), so the shared server is never
 * reconfigured or restarted; it may be the same server as DATABASE_URL where that one is logical.
 */
export const CDC_DATABASE_URL = process.env.CDC_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5433/test';

/** `npm run services` (scripts/services.ts) starts and configures local services; these say so when one is missing. */
export const PG_HINT =
  'run `npm run services` (starts a local cluster and creates the database), or start it with: ' +
  'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (or set DATABASE_URL)';
export const CDC_PG_HINT =
  'run `npm run services` (creates and starts a local cluster with wal_level=logical on port 5433), ' +
  'or set CDC_DATABASE_URL to a PostgreSQL with wal_level=logical';
export const AMQP_HINT =
  'run `npm run services` (starts a local broker and enables the consistent-hash plugin), or start it with: ' +
  'rabbitmq-server -detached (or set AMQP_URL)';

/** What one scope (a test, or a whole file) created, so it can be dropped or kept together. */
export class Scope {
  readonly names = new Set<string>();
  readonly pools = new Set<pg.Pool>();
  readonly connections = new Set<amqp.ChannelModel>();
}

/**
 * Where creations are recorded: the scope of the running test (async context) or, outside
 * any test (hooks, tools), the process-wide scope. Each test file runs in its own process.
 */
export const registry = {
  process: new Scope(),
  all: new Scope(),
  storage: new AsyncLocalStorage<Scope>(),
  current(): Scope {
    return this.storage.getStore() ?? this.process;
  },
  name(name: string): void {
    this.current().names.add(name);
    this.all.names.add(name);
  },
  pool(pool: pg.Pool): void {
    this.current().pools.add(pool);
    this.all.pools.add(pool);
  },
  connection(connection: amqp.ChannelModel): void {
    this.current().connections.add(connection);
    this.all.connections.add(connection);
  },
};

/**
 * Lower-case and short enough to be a schema name as well as a queue or exchange name, and
 * random so concurrent runs never share one. Recorded: the rig drops it as schema, queue,
 * `<queue>.retry`, `<queue>.dead` and exchange after the test, and checks after the file that none is left.
 */
export function uniqueName(prefix: string): string {
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  registry.name(name);
  return name;
}

/** Hides the password of a service URL for messages. */
export function redactUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** One statement on a connection of its own (a server may be going away: nothing is kept open). */
export async function queryOnce<R extends pg.QueryResultRow>(
  url: string,
  sql: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  // A server stopped under an idle client emits 'error' with no query to reject; without a listener that would crash.
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Opens a pool and proves the server answers; a missing service fails with how to start it. */
export async function connectPostgres(max = 5, options: pg.PoolConfig = {}): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max, connectionTimeoutMillis: 5000, ...options });
  pool.on('error', () => undefined); // an idle connection dying must not crash; the next query reports it
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(
      `PostgreSQL is not reachable at ${redactUrl(DATABASE_URL)} (${(err as Error).message}); ${PG_HINT}`,
    );
  }
  registry.pool(pool);
  return pool;
}

export async function connectRabbit(
  options: amqp.Options.Connect | Record<string, unknown> = {},
): Promise<amqp.ChannelModel> {
  let connection: amqp.ChannelModel;
  try {
    connection = await amqp.connect(AMQP_URL, options);
  } catch (err) {
    throw new Error(`RabbitMQ is not reachable at ${redactUrl(AMQP_URL)} (${(err as Error).message}); ${AMQP_HINT}`);
  }
  registry.connection(connection);
  return connection;
}

/** Runs `work` on a throwaway channel: a failed broker operation closes only that channel. */
export async function withChannel<T>(
  connection: amqp.ChannelModel,
  work: (channel: amqp.Channel) => Promise<T>,
): Promise<T> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    return await work(channel);
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/**
 * The broker objects one name can stand for: a queue, its `.retry` and `.dead` (quorum) companions,
 * its retry tiers of the default delays, an exchange.
 */
export function brokerObjects(name: string): { queues: string[]; exchanges: string[] } {
  const tiers = DEFAULT_RETRY_TIERS_MS.map((ms) => retryTierQueueName(name, ms));
  return { queues: [name, `${name}.retry`, ...tiers, `${name}.dead`], exchanges: [name] };
}

/**
 * Deletes queues (with their `.retry` and `.dead`) and exchanges named `names`; what is not there is
 * left alone. Found with passive declares side by side (most names, event ids among them, name nothing
 * on the broker), deleted one after another: RabbitMQ 3.10 can crash a channel with INTERNAL_ERROR
 * when two exchanges bound to each other are deleted at the same moment.
 */
export async function dropBrokerNames(connection: amqp.ChannelModel, names: Iterable<string>): Promise<void> {
  const found = await eachObject(names, async (object) => ((await exists(connection, object)) ? object : undefined));
  for (const object of found) {
    if (!object) continue;
    await withChannel(connection, (ch) =>
      object.kind === 'queue' ? ch.deleteQueue(object.name) : ch.deleteExchange(object.name),
    ).catch(() => undefined);
  }
}

/** Which of `names` still exist on the broker, as queue or exchange (passive declares, one channel each). */
export async function existingBrokerObjects(connection: amqp.ChannelModel, names: Iterable<string>): Promise<string[]> {
  const found = await eachObject(names, async (object) =>
    (await exists(connection, object)) ? `${object.kind} ${object.name}` : undefined,
  );
  return found.filter((object): object is string => object !== undefined);
}

interface BrokerObject {
  kind: 'queue' | 'exchange';
  name: string;
}

function exists(connection: amqp.ChannelModel, { kind, name }: BrokerObject): Promise<boolean> {
  return withChannel(connection, (ch) => (kind === 'queue' ? ch.checkQueue(name) : ch.checkExchange(name))).then(
    () => true,
    () => false,
  );
}

/**
 * Runs `work` for every queue and exchange the names stand for, a batch of channels at a time: one
 * after another, the passive declares for a test file's few hundred names (every uniqueName counts,
 * event ids included) took 20 s and more, each throwaway channel costing a few round trips.
 */
async function eachObject<T>(names: Iterable<string>, work: (object: BrokerObject) => Promise<T>): Promise<T[]> {
  const objects = [...names].flatMap((name): BrokerObject[] => {
    const { queues, exchanges } = brokerObjects(name);
    return [
      ...queues.map((queue) => ({ kind: 'queue' as const, name: queue })),
      ...exchanges.map((exchange) => ({ kind: 'exchange' as const, name: exchange })),
    ];
  });
  const results: T[] = [];
  for (let at = 0; at < objects.length; at += CHANNELS_AT_ONCE)
    results.push(...(await Promise.all(objects.slice(at, at + CHANNELS_AT_ONCE).map(work))));
  return results;
}

// Far below a connection's channel limit (2047 by default), enough to hide the round trips.
const CHANNELS_AT_ONCE = 64;

/** Which of `names` exist as PostgreSQL schemas. */
export async function existingSchemas(pool: pg.Pool, names: Iterable<string>): Promise<string[]> {
  const { rows } = await pool.query<{ nspname: string }>(
    `SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[])`,
    [[...names]],
  );
  return rows.map((row) => row.nspname);
}

export async function dropSchemas(pool: pg.Pool, names: Iterable<string>): Promise<void> {
  for (const name of names) await pool.query(`DROP SCHEMA IF EXISTS "${name.replaceAll('"', '""')}" CASCADE`);
}
