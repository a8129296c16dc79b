// test-files: session, one LISTEN connection for every tenant; counts backends by application_name and broker connections by name
/**
 * startTenants (docs/tenants.md) on the real PostgreSQL and RabbitMQ: 50 tenant schemas, a relay
 * and a consumer each, in this process. One tenant starts with a backlog of thousands, the others
 * with a few events each. Asserted: every projection and inbox row of a tenant comes from its own
 * outbox (no cross-tenant delivery), each event is applied once, the other tenants finish while
 * the backlogged one still has pending rows (fair progress, an ordering, not a timing), one broker
 * connection for the whole process and at most maxConnections PostgreSQL connections. RSS and
 * durations are printed, never asserted.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { appendManyToOutbox, migrate, startTenants, withTransaction, type Settlement } from '../../src/index.js';
import { serveTenantMetrics } from '../../src/metrics/index.js';
import {
  AMQP_URL,
  DATABASE_URL,
  connectPostgres,
  closeConnection,
  connectionPidsNamed,
  connectRabbit,
  describe,
  it,
  registry,
  uniqueName,
  waitFor,
} from '../support/rig.js';
import { createSeenTable, foreignRows, recordOrigin } from '../support/tenant-fixture.js';

const TENANTS = 50;
const BACKLOG = 1_000;
const FEW = 4;
const MAX_CONNECTIONS = 8;

function urlNamed(applicationName: string): string {
  const url = new URL(DATABASE_URL);
  url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/** The most connections of `name` seen at once in pg_stat_activity, until stopped. */
function watchConnections(pool: pg.Pool, name: string): { stop(): Promise<number> } {
  let most = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [name],
      );
      most = Math.max(most, rows[0]!.n);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
}

async function migrateAll(pool: pg.Pool, schemas: string[]): Promise<void> {
  for (let i = 0; i < schemas.length; i += 5)
    await Promise.all(
      schemas.slice(i, i + 5).map(async (schema) => {
        await migrate(pool, { schema });
        await createSeenTable(pool, schema);
      }),
    );
}

async function appendEvents(pool: pg.Pool, schema: string, count: number): Promise<string[]> {
  const events = Array.from({ length: count }, (_, i) => ({
    aggregateType: 'order',
    aggregateId: `${schema}-${i % 20}`,
    aggregateVersion: Math.floor(i / 20) + 1,
    eventType: 'OrderChanged',
    payload: { origin: schema },
  }));
  const appended = await withTransaction(pool, (tx) => appendManyToOutbox(tx, events, { schema }));
  return appended.map((event) => event.eventId);
}

/** One event per schema at `version` of aggregate o-1, each in its own transaction; their ids. */
async function appendAcross(pool: pg.Pool, schemas: string[], version: number): Promise<string[]> {
  const ids: string[] = [];
  for (const schema of schemas) {
    const event = {
      aggregateType: 'order',
      aggregateId: 'o-1',
      aggregateVersion: version,
      eventType: 'OrderChanged',
      payload: { origin: schema },
    };
    const [appended] = await withTransaction(pool, (tx) => appendManyToOutbox(tx, [event], { schema }));
    ids.push(appended!.eventId);
  }
  return ids;
}

describe('tenants', () => {
  it(`${TENANTS} schemas share one broker connection and ${MAX_CONNECTIONS} PostgreSQL connections; no event crosses tenants; a backlog of ${BACKLOG} does not starve the others`, async () => {
    // Both services first, so a missing one fails here naming it.
    const admin = await connectPostgres(6);
    const broker = await connectRabbit();
    const prefix = uniqueName('cvt.tn');
    const schemas = Array.from({ length: TENANTS }, () => uniqueName('cvt_tn'));
    for (const schema of schemas) {
      registry.name(`${prefix}.${schema}`);
      registry.name(`${prefix}.q.${schema}`);
    }
    const appName = uniqueName('cvt_tn_app');
    const name = uniqueName('cvt_tn_proc');
    const started = performance.now();
    await migrateAll(admin, schemas);
    const [backlogged, ...others] = schemas as [string, ...string[]];
    const origin = new Map<string, string>();
    for (const id of await appendEvents(admin, backlogged, BACKLOG)) origin.set(id, backlogged);
    for (const schema of others) for (const id of await appendEvents(admin, schema, FEW)) origin.set(id, schema);
    const setUp = performance.now();

    const applied = new Map<string, { schema: string; times: number }>();
    const published = new Map<string, number>();
    let othersApplied = 0;
    let backlogPublishedWhenOthersDone: number | undefined;
    const rssBefore = process.memoryUsage().rss;
    const tenants = startTenants({
      schemas,
      connectionString: urlNamed(appName),
      maxConnections: MAX_CONNECTIONS,
      amqpUrl: AMQP_URL,
      exchange: prefix,
      name,
      relay: { batchSize: 20, pollIntervalMs: 200 },
      consumer: (schema) => ({
        queue: `${prefix}.q.${schema}`,
        queueType: 'classic',
        handlers: { '*': recordOrigin(schema) },
      }),
    });
    const onApplied = (schema: string, settlement: Settlement) => {
      if (settlement.action !== 'ack' || settlement.outcome !== 'applied') return;
      const seen = applied.get(settlement.eventId) ?? { schema, times: 0 };
      seen.times++;
      applied.set(settlement.eventId, seen);
      if (schema !== backlogged && ++othersApplied === others.length * FEW)
        backlogPublishedWhenOthersDone = published.get(backlogged) ?? 0;
    };
    for (const schema of schemas) {
      tenants.relay(schema).on('published', (ids) => published.set(schema, (published.get(schema) ?? 0) + ids.length));
      // Settled: committed, then acked; drained: applied from the reorder buffer.
      tenants.consumer(schema)!.on('settled', (s) => onApplied(schema, s));
      tenants.consumer(schema)!.on('drained', (s) => onApplied(schema, s));
    }
    const metrics = serveTenantMetrics(tenants, { port: 0 });
    const watch = watchConnections(admin, appName);
    try {
      await tenants.ready({ timeoutMs: 30_000 });
      const brokerConnections = await connectionPidsNamed(`converge-tenants ${name}`);
      await waitFor(() => applied.size === origin.size || undefined, `all ${origin.size} events applied`, 50_000);
      const drained = performance.now();
      const mostPg = await watch.stop();
      const rssAfter = process.memoryUsage().rss;

      assert.equal(brokerConnections.length, 1, 'the broker sees one connection for the whole process');
      assert.equal(tenants.transport.connectionsOpened, 1, 'one broker connection opened, never reopened');
      assert.ok(mostPg <= MAX_CONNECTIONS, `at most ${MAX_CONNECTIONS} PostgreSQL connections (saw ${mostPg})`);
      assert.ok(mostPg >= 2, `the pool and the LISTEN connection were seen (saw ${mostPg})`);
      assert.ok(
        backlogPublishedWhenOthersDone !== undefined && backlogPublishedWhenOthersDone < BACKLOG,
        `the other ${others.length} tenants were applied while ${backlogged} still had pending rows (${backlogPublishedWhenOthersDone ?? 'never'} of ${BACKLOG} published then)`,
      );
      for (const [eventId, seen] of applied) {
        assert.equal(seen.times, 1, `event ${eventId} applied once`);
        assert.equal(seen.schema, origin.get(eventId), `event ${eventId} applied by its own tenant`);
      }
      for (const schema of schemas) {
        const foreign = await foreignRows(admin, schema, schema);
        const expected = schema === backlogged ? BACKLOG : FEW;
        assert.deepEqual(foreign, { seen: 0, inbox: 0, applied: expected }, `schema ${schema}: only its own events`);
      }
      // Every tenant's series under the single relay's names, labelled with its schema.
      const scraped = await (await fetch(`${await metrics.url}/metrics`)).text();
      const [quiet] = others as [string];
      assert.match(scraped, new RegExp(`converge_relay_published_total\\{schema="${backlogged}"\\} ${BACKLOG}\\b`));
      assert.match(scraped, new RegExp(`converge_relay_published_total\\{schema="${quiet}"\\} ${FEW}\\b`));
      assert.match(scraped, new RegExp(`converge_outbox_rows\\{status="published",schema="${quiet}"\\} ${FEW}\\b`));
      console.log(
        `tenants: ${TENANTS} schemas, ${origin.size} events; set-up ${Math.round(setUp - started)} ms, ` +
          `drained in ${Math.round(drained - setUp)} ms; RSS ${mb(rssBefore)} -> ${mb(rssAfter)} MB; ` +
          `PostgreSQL connections at most ${mostPg}; broker connections ${brokerConnections.length}; ` +
          `${backlogged} had ${backlogPublishedWhenOthersDone} of ${BACKLOG} published when the others were done`,
      );
    } finally {
      await watch.stop();
      await metrics.close();
      await tenants.stop();
      await broker.close();
      await admin.end();
    }
  });
  it('when the broker closes the shared connection, every tenant reconnects on one fresh connection and nothing is lost or applied twice', async () => {
    const admin = await connectPostgres(3);
    const prefix = uniqueName('cvt.tn');
    const schemas = Array.from({ length: 3 }, () => uniqueName('cvt_tn'));
    for (const schema of schemas) {
      registry.name(`${prefix}.${schema}`);
      registry.name(`${prefix}.q.${schema}`);
    }
    const name = uniqueName('cvt_tn_proc');
    await migrateAll(admin, schemas);
    const applied = new Map<string, number>();
    const tenants = startTenants({
      schemas,
      connectionString: DATABASE_URL,
      maxConnections: 4,
      amqpUrl: AMQP_URL,
      exchange: prefix,
      name,
      relay: { pollIntervalMs: 50, reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 200 } },
      consumer: (schema) => ({
        queue: `${prefix}.q.${schema}`,
        queueType: 'classic',
        reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 200 },
        handlers: { '*': recordOrigin(schema) },
      }),
    });
    for (const schema of schemas)
      tenants.consumer(schema)!.on('settled', (s) => {
        if (s.action === 'ack' && s.outcome === 'applied') applied.set(s.eventId, (applied.get(s.eventId) ?? 0) + 1);
      });
    try {
      await tenants.ready({ timeoutMs: 30_000 });
      const before = await appendAcross(admin, schemas, 1);
      await waitFor(() => before.every((id) => applied.has(id)) || undefined, 'the first events applied');
      const [pid] = await connectionPidsNamed(`converge-tenants ${name}`);
      assert.ok(pid, 'the shared connection is on the broker');
      await closeConnection(pid, 'test: the broker drops the shared connection');
      await waitFor(() => tenants.transport.connectionsOpened === 2 || undefined, 'a fresh shared connection');
      const after = await appendAcross(admin, schemas, 2);
      await waitFor(() => after.every((id) => applied.has(id)) || undefined, 'the events after the loss applied');
      assert.equal((await connectionPidsNamed(`converge-tenants ${name}`)).length, 1, 'one connection again');
      assert.deepEqual(
        [...applied.values()].filter((times) => times !== 1),
        [],
        'each event applied once',
      );
      for (const schema of schemas)
        assert.deepEqual(await foreignRows(admin, schema, schema), { seen: 0, inbox: 0, applied: 2 }, schema);
    } finally {
      await tenants.stop();
      await admin.end();
    }
  });
});

function mb(bytes: number): number {
  return Math.round(bytes / 1_048_576);
}
