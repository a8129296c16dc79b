// test-files: session, a LISTEN connection per tenant database wakes its relay; counts backends by database
/**
 * startTenants with a database per tenant (docs/tenants.md) on the real PostgreSQL and RabbitMQ:
 * DATABASES databases on one server, each migrated in the same schema, a relay and a consumer each,
 * in this process. Asserted: every projection and inbox row of a tenant comes from its own outbox
 * (the same schema name in every database, so only the database tells them apart), each event is
 * applied once, relays woken by their own database's NOTIFY (their poll interval is far longer than
 * the wait), one broker connection, at most the per-database share of maxConnections in each
 * database and the tenant's series labelled `database`. Configuration mistakes are refused first.
 */
import assert from 'node:assert/strict';
import pg from 'pg';
import { appendManyToOutbox, migrate, startTenants, withTransaction } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { serveTenantMetrics } from '../../src/metrics/index.js';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  connectionPidsNamed,
  describe,
  it,
  registry,
  uniqueName,
  waitFor,
} from '../support/rig.js';
import { createSeenTable, foreignRows, recordOrigin } from '../support/tenant-fixture.js';

const DATABASES = 4;
const EVENTS = 30;
const MAX_CONNECTIONS = 8;
/** Far past the test's waits: only NOTIFY on the tenant's own database wakes its relay in time. */
const POLL_MS = 120_000;

function databaseUrl(database: string, applicationName?: string): string {
  const url = new URL(DATABASE_URL);
  url.pathname = `/${database}`;
  if (applicationName) url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/** Creates the databases, each with `schema` migrated and a `seen` projection table; drops them in `after`. */
async function createDatabases(admin: pg.Pool, names: string[], schema: string): Promise<() => Promise<void>> {
  const created: string[] = [];
  const drop = async () => {
    for (const name of created) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  };
  try {
    for (const name of names) {
      await admin.query(`CREATE DATABASE "${name}"`);
      created.push(name);
      const pool = new pg.Pool({ connectionString: databaseUrl(name), max: 1 });
      try {
        await migrate(pool, { schema });
        await createSeenTable(pool, schema);
      } finally {
        await pool.end();
      }
    }
  } catch (err) {
    await drop();
    throw err;
  }
  return drop;
}

async function appendEvents(url: string, schema: string, origin: string): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const events = Array.from({ length: EVENTS }, (_, i) => ({
      aggregateType: 'order',
      aggregateId: `o-${i % 5}`,
      aggregateVersion: Math.floor(i / 5) + 1,
      eventType: 'OrderChanged',
      payload: { origin },
    }));
    const appended = await withTransaction(pool, (tx) => appendManyToOutbox(tx, events, { schema }));
    return appended.map((event) => event.eventId);
  } finally {
    await pool.end();
  }
}

/** foreignRows of the tenant's own database. */
async function ownRows(url: string, schema: string, origin: string) {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    return await foreignRows(pool, schema, origin);
  } finally {
    await pool.end();
  }
}

describe('tenant databases', () => {
  it('refuses a layout it cannot run, naming the option', () => {
    const base = { amqpUrl: AMQP_URL, exchange: 'x' };
    const refused = (options: Record<string, unknown>, path: string) =>
      assert.throws(
        () => startTenants({ ...base, ...options }),
        (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.path === path),
        path,
      );
    refused({ connectionString: DATABASE_URL }, 'schemas');
    refused({ schemas: ['a'], databases: { a: DATABASE_URL } }, 'schemas');
    refused({ databases: { a: DATABASE_URL }, connectionString: DATABASE_URL }, 'connectionString');
    refused({ databases: { a: DATABASE_URL, b: DATABASE_URL }, maxConnections: 3 }, 'maxConnections');
    refused({ schemas: ['a'], connectionString: DATABASE_URL, schema: 'converge' }, 'schema');
    refused({ databases: { 'Not-A-Name': DATABASE_URL } }, 'databases.Not-A-Name');
    refused({ databases: {} }, 'databases');
  });

  it(`${DATABASES} databases with the same schema: a pool and a LISTEN connection each, one broker connection, no event crosses tenants`, async () => {
    const admin = await connectPostgres(2);
    const prefix = uniqueName('cvt.td');
    const schema = uniqueName('cvt_td');
    const tenantNames = Array.from({ length: DATABASES }, () => uniqueName('cvt_td_db'));
    for (const tenant of tenantNames) {
      registry.name(`${prefix}.${tenant}`);
      registry.name(`${prefix}.q.${tenant}`);
    }
    const appName = uniqueName('cvt_td_app');
    const name = uniqueName('cvt_td_proc');
    const dropDatabases = await createDatabases(admin, tenantNames, schema);
    const applied = new Map<string, { tenant: string; times: number }>();
    const tenants = startTenants({
      databases: Object.fromEntries(tenantNames.map((tenant) => [tenant, databaseUrl(tenant, appName)])),
      schema,
      maxConnections: MAX_CONNECTIONS,
      amqpUrl: AMQP_URL,
      exchange: prefix,
      name,
      relay: { batchSize: 10, pollIntervalMs: POLL_MS },
      consumer: (tenant) => ({
        queue: `${prefix}.q.${tenant}`,
        queueType: 'classic',
        handlers: { '*': recordOrigin(schema) },
      }),
    });
    for (const tenant of tenantNames)
      tenants.consumer(tenant)!.on('settled', (s) => {
        if (s.action !== 'ack' || s.outcome !== 'applied') return;
        const seen = applied.get(s.eventId) ?? { tenant, times: 0 };
        seen.times++;
        applied.set(s.eventId, seen);
      });
    const metrics = serveTenantMetrics(tenants, { port: 0 });
    try {
      await tenants.ready({ timeoutMs: 30_000 });
      // From here only the tenant database's NOTIFY wakes its relay in time: wait until each LISTENs.
      await waitFor(async () => {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(DISTINCT datname)::int AS n FROM pg_stat_activity
            WHERE application_name = $1 AND query ILIKE 'LISTEN%'`,
          [appName],
        );
        return rows[0]!.n === DATABASES || undefined;
      }, 'a LISTEN connection in every tenant database');
      const origin = new Map<string, string>();
      for (const tenant of tenantNames)
        for (const id of await appendEvents(databaseUrl(tenant), schema, tenant)) origin.set(id, tenant);
      await waitFor(() => applied.size === origin.size || undefined, `all ${origin.size} events applied`, 30_000);

      const { rows } = await admin.query<{ datname: string; n: number }>(
        'SELECT datname, count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 GROUP BY datname',
        [appName],
      );
      const perDatabase = MAX_CONNECTIONS / DATABASES;
      assert.deepEqual(
        rows.map((row) => row.datname).sort(),
        [...tenantNames].sort(),
        'a pool in every tenant database',
      );
      for (const row of rows) assert.ok(row.n <= perDatabase, `${row.datname}: ${row.n} ≤ ${perDatabase} connections`);
      assert.equal((await connectionPidsNamed(`converge-tenants ${name}`)).length, 1, 'one broker connection');
      for (const [eventId, seen] of applied) {
        assert.equal(seen.times, 1, `event ${eventId} applied once`);
        assert.equal(seen.tenant, origin.get(eventId), `event ${eventId} applied by its own tenant`);
      }
      for (const tenant of tenantNames)
        assert.deepEqual(
          await ownRows(databaseUrl(tenant), schema, tenant),
          { seen: 0, inbox: 0, applied: EVENTS },
          `${tenant}: only its own events`,
        );
      const status = await tenants.status();
      assert.deepEqual(Object.keys(status), tenantNames, 'status keyed by tenant');
      for (const tenant of tenantNames)
        assert.equal(status[tenant]!.outbox.pending, 0, `${tenant} has nothing pending`);
      assert.deepEqual(
        tenants.state().map((state) => [state.tenant, state.schema]),
        tenantNames.map((tenant) => [tenant, schema]),
      );
      const scraped = await (await fetch(`${await metrics.url}/metrics`)).text();
      for (const tenant of tenantNames)
        assert.match(scraped, new RegExp(`converge_relay_published_total\\{database="${tenant}"\\} ${EVENTS}\\b`));
    } finally {
      await metrics.close();
      await tenants.stop();
      await dropDatabases();
      await admin.end();
    }
  });
});
