/**
 * `npm run bench:tenants [-- --tenants N] [--events E] [--max-connections C]`
 *
 * startTenants (docs/tenants.md) on the local PostgreSQL and RabbitMQ: N tenant schemas (default 50),
 * a relay and a consumer each in this process, then E events per tenant (default 200) appended at
 * once and drained end to end (outbox -> relay -> broker -> consumer -> projection). Prints RSS
 * (before start, started and idle, peak while draining), the drain throughput, the most PostgreSQL
 * connections seen (pg_stat_activity by application_name) and the broker connections opened.
 * Everything it creates is removed at the end, also after a failure.
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { appendManyToOutbox, migrate, startTenants, withTransaction, type Tenants } from '../src/index.js';
import { DEFAULT_RETRY_TIERS_MS, retryTiers } from '../src/transport/queue-arguments.js';
import { rabbitmqctl } from '../kit/broker-admin.js';
import {
  AMQP_URL,
  Cleanup,
  DATABASE_URL,
  assertLoopback,
  deleteBrokerObjects,
  note,
  openBroker,
  openPool,
  unique,
} from './env.js';

const { values } = parseArgs({
  options: {
    tenants: { type: 'string', default: '50' },
    events: { type: 'string', default: '200' },
    'max-connections': { type: 'string', default: '10' },
  },
});
const TENANTS = Number(values.tenants);
const EVENTS = Number(values.events);
const MAX_CONNECTIONS = Number(values['max-connections']);

const mb = (bytes: number) => Math.round(bytes / 1_048_576);

async function main(): Promise<void> {
  assertLoopback();
  const cleanup = new Cleanup();
  const admin = await openPool(6);
  const broker = await openBroker();
  const prefix = unique('bench.tn');
  const schemas = Array.from({ length: TENANTS }, () => unique('bench_tn'));
  const appName = unique('bench_tn_app');
  try {
    for (const schema of schemas) {
      const queue = `${prefix}.q.${schema}`;
      const queues = [queue, `${queue}.retry`, ...retryTiers(queue, DEFAULT_RETRY_TIERS_MS).map((t) => t.queue)];
      cleanup.add(`drop ${schema}`, () => admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
      cleanup.add(`delete ${queue}`, () => deleteBrokerObjects(broker, { queues, exchanges: [`${prefix}.${schema}`] }));
    }
    note(`migrating ${TENANTS} schemas`);
    for (const schema of schemas) {
      await migrate(admin, { schema });
      await admin.query(`CREATE TABLE "${schema}".seen (event_id uuid PRIMARY KEY)`);
    }
    await run(admin, schemas, prefix, appName);
  } finally {
    const failures = await cleanup.runAll();
    for (const failure of failures) note(`cleanup failed: ${failure}`);
    await broker.close().catch(() => undefined);
    await admin.end();
  }
}

async function run(admin: pg.Pool, schemas: string[], prefix: string, appName: string): Promise<void> {
  let applied = 0;
  const url = new URL(DATABASE_URL);
  url.searchParams.set('application_name', appName);
  const rssBefore = process.memoryUsage().rss;
  const tenants = startTenants({
    schemas,
    connectionString: url.toString(),
    maxConnections: MAX_CONNECTIONS,
    amqpUrl: AMQP_URL,
    exchange: prefix,
    consumer: (schema) => ({
      queue: `${prefix}.q.${schema}`,
      queueType: 'classic',
      handlers: {
        '*': async (event, ctx) => {
          await ctx.tx.query(`INSERT INTO "${schema}".seen (event_id) VALUES ($1)`, [event.eventId]);
        },
      },
    }),
  });
  for (const schema of schemas)
    tenants.consumer(schema)!.on('settled', (s) => void (s.action === 'ack' && s.outcome === 'applied' && applied++));
  try {
    await tenants.ready({ timeoutMs: 60_000 });
    const rssStarted = process.memoryUsage().rss;
    const channels = await channelsOf(`converge-tenants ${tenants.options.name}`);
    note(`${TENANTS} tenants started; appending ${EVENTS} events each`);
    // From the first append: relays start publishing while later tenants are still being written.
    const started = performance.now();
    await appendAll(admin, schemas);
    const total = TENANTS * EVENTS;
    let peakRss = 0;
    let mostPg = 0;
    while (applied < total) {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      mostPg = Math.max(mostPg, await countConnections(admin, appName));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    report(tenants, { rssBefore, rssStarted, peakRss, mostPg, total, seconds, channels });
  } finally {
    await tenants.stop();
  }
}

async function appendAll(admin: pg.Pool, schemas: string[]): Promise<void> {
  for (const schema of schemas) {
    const events = Array.from({ length: EVENTS }, (_, i) => ({
      aggregateType: 'order',
      aggregateId: `o${i % 20}`,
      aggregateVersion: Math.floor(i / 20) + 1,
      eventType: 'OrderChanged',
      payload: {},
    }));
    await withTransaction(admin, (tx) => appendManyToOutbox(tx, events, { schema }));
  }
}

/** Channels of the shared connection as the broker counts them (rabbitmqctl), or why not. */
async function channelsOf(connectionName: string): Promise<string> {
  try {
    const out = await rabbitmqctl(['list_connections', 'client_properties', 'channels']);
    const line = out.split('\n').find((l) => l.includes(`{"connection_name","${connectionName}"}`));
    return line?.trim().split('\t').pop() ?? 'unknown (connection not listed)';
  } catch (err) {
    return `unknown (${(err as Error).message})`;
  }
}

async function countConnections(admin: pg.Pool, appName: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
    [appName],
  );
  return rows[0]!.n;
}

function report(
  tenants: Tenants,
  m: {
    rssBefore: number;
    rssStarted: number;
    peakRss: number;
    mostPg: number;
    total: number;
    seconds: number;
    channels: string;
  },
): void {
  console.log(
    [
      `tenants=${TENANTS} events=${m.total} (${EVENTS} each) maxConnections=${MAX_CONNECTIONS}`,
      `append and drain ${m.seconds.toFixed(1)} s = ${Math.round(m.total / m.seconds)} events/s end to end`,
      `RSS ${mb(m.rssBefore)} MB before start, ${mb(m.rssStarted)} MB started (idle), ${mb(m.peakRss)} MB peak while draining`,
      `PostgreSQL connections at most ${m.mostPg}; broker connections opened ${tenants.transport.connectionsOpened}, with ${m.channels} channels once started`,
    ].join('\n'),
  );
}

main().catch((err: unknown) => {
  console.error((err as Error).message);
  process.exitCode = 1;
});
