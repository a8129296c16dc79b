import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import type pg from 'pg';
import prom from 'prom-client';
import { Consumer, appendToOutbox, withTransaction, Relay, silentLogger } from '../../src/index.js';
import { ContentConflictError } from '../../src/errors.js';
import {
  instrumentConsumer,
  instrumentRelay,
  registerConvergenceMetrics,
  serveMetrics,
  serveRelayMetrics,
  serveConsumerMetrics,
} from '../../src/metrics/index.js';
import { openBrokerFixture } from '../support/broker-fixture.js';
import {
  after,
  before,
  describe,
  it,
  createTestSchema,
  waitFor,
  type TestDatabase,
  AMQP_URL,
  DATABASE_URL,
} from '../support/rig.js';

describe('convergence metrics', () => {
  let db: TestDatabase;
  let server: http.Server;
  let base: string;

  before(async () => {
    db = await createTestSchema('cvm');
    server = await serveMetrics(registerConvergenceMetrics(db.pool, { schema: db.schema, gapAfterMs: 30_000 }), {
      port: 0,
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    await db.close();
  });

  const park = (consumer: string, aggregateId: string, version: number, age: string) =>
    db.pool.query(
      `INSERT INTO "${db.schema}".parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body, parked_at)
       VALUES ($1, $1 || $2 || $3::text, 'f', 'p', 'order', $2, $3::bigint, 1, '{}', '\\x00', now() - $4::interval)`,
      [consumer, aggregateId, version, age],
    );

  it('reports parked events, aggregates stuck longer than the threshold and the oldest age per consumer', async () => {
    const empty = await (await fetch(`${base}/metrics`)).text();
    assert.doesNotMatch(empty, /converge_parked_events\{/, 'no series while nothing is parked');
    await park('search', 'o1', 3, '2 minutes');
    await park('search', 'o1', 4, '1 minute');
    await park('search', 'o2', 2, '1 second');
    await park('stats', 'o9', 5, '10 seconds');
    const response = await fetch(`${base}/metrics`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /text\/plain/);
    const body = await response.text();
    assert.match(body, /converge_parked_events\{consumer="search"\} 3\n/);
    assert.match(body, /converge_parked_events\{consumer="stats"\} 1\n/);
    assert.match(body, /converge_gap_aggregates\{consumer="search"\} 1\n/, 'o2 has waited only a second');
    assert.match(body, /converge_gap_aggregates\{consumer="stats"\} 0\n/);
    const oldest = Number(/converge_oldest_parked_seconds\{consumer="search"\} ([\d.]+)/.exec(body)?.[1]);
    assert.ok(oldest >= 120 && oldest < 180, `oldest ${oldest} s`);
  });

  it('reports outbox rows by status and the age of the oldest pending event', async () => {
    await db.pool.query(
      `INSERT INTO "${db.schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, occurred_at)
       VALUES ('m1', 'order', 'm1', 1, 'X', '{}', 'pending', now() - interval '90 seconds'),
              ('m2', 'order', 'm2', 1, 'X', '{}', 'pending', now()),
              ('m3', 'order', 'm3', 1, 'X', '{}', 'failed', now())`,
    );
    const body = await (await fetch(`${base}/metrics`)).text();
    assert.match(body, /converge_outbox_rows\{status="pending"\} 2\n/);
    assert.match(body, /converge_outbox_rows\{status="failed"\} 1\n/);
    assert.match(body, /converge_outbox_rows\{status="published"\} 0\n/);
    const oldest = Number(/converge_outbox_oldest_pending_seconds ([\d.]+)/.exec(body)?.[1]);
    assert.ok(oldest >= 90 && oldest < 150, `oldest pending ${oldest} s`);
  });

  it('answers /healthz and 404 elsewhere', async () => {
    assert.equal(await (await fetch(`${base}/healthz`)).text(), 'ok\n');
    assert.equal((await fetch(`${base}/nope`)).status, 404);
  });
});

describe('relay and consumer counters, readiness', () => {
  it('count what the relay and the consumer report, by reason and outcome', async () => {
    const registry = new prom.Registry();
    // Not started: the events are emitted here, as the running components emit them.
    const relay = new Relay({ amqpUrl: AMQP_URL, connectionString: DATABASE_URL, logger: silentLogger });
    const consumer = new Consumer({
      amqpUrl: AMQP_URL,
      connectionString: DATABASE_URL,
      queue: 'metrics-test',
      handlers: { X: async () => undefined },
      logger: silentLogger,
    });
    instrumentRelay(relay, registry);
    instrumentConsumer(consumer, registry);
    relay.emit('published', ['a', 'b', 'c']);
    relay.emit('retry', { eventId: 'd', attempts: 0, brokerRetries: 1, reason: 'nacked' });
    relay.emit('failed', { eventId: 'e', attempts: 10, brokerRetries: 0, reason: 'returned' });
    relay.emit('confirmed', [2, 30]);
    consumer.emit('settled', {
      action: 'ack',
      outcome: 'applied',
      eventId: 'a',
      occurredAt: new Date(Date.now() - 1_500).toISOString(),
    });
    consumer.emit('settled', { action: 'ack', outcome: 'parked', eventId: 'c' });
    consumer.emit('settled', {
      action: 'ack',
      outcome: 'quarantined',
      reason: 'stale-version',
      eventId: 'f',
      quarantineId: '1',
      untrustedHeaders: ['x-converge-attempt', 'x-converge-replay-of'],
    });
    consumer.emit('settled', { action: 'retry', delayMs: 10, attempt: 1, reason: 'handler-error', eventId: 'g' });
    consumer.emit('drained', {
      action: 'ack',
      outcome: 'applied',
      eventId: 'c',
      occurredAt: new Date(Date.now() - 20_000).toISOString(),
    });
    consumer.emit('conflict', new ContentConflictError('metrics-test', 'h', 'f1', 'f2'));
    const text = await registry.metrics();
    for (const line of [
      'converge_relay_published_total 3',
      'converge_relay_publish_failures_total{reason="returned"} 1',
      'converge_relay_publish_failures_total{reason="nacked"} 1',
      'converge_relay_failed_total 1',
      'converge_consumer_deliveries_total{outcome="applied"} 1',
      'converge_consumer_deliveries_total{outcome="parked"} 1',
      'converge_consumer_deliveries_total{outcome="quarantined"} 1',
      'converge_consumer_deliveries_total{outcome="retry"} 1',
      'converge_consumer_quarantined_total{reason="stale-version"} 1',
      'converge_consumer_drained_total{outcome="applied"} 1',
      'converge_consumer_conflicts_total 1',
      'converge_consumer_untrusted_headers_total{header="x-converge-attempt"} 1',
      'converge_consumer_untrusted_headers_total{header="x-converge-replay-of"} 1',
      'converge_relay_confirm_seconds_bucket{le="0.001"} 0',
      'converge_relay_confirm_seconds_bucket{le="0.0025"} 1',
      'converge_relay_confirm_seconds_bucket{le="0.05"} 2',
      'converge_relay_confirm_seconds_count 2',
      // 1.5 s and 20 s of lag: one in the 2.5 s bucket, both by 30 s.
      'converge_consumer_lag_seconds_bucket{le="1"} 0',
      'converge_consumer_lag_seconds_bucket{le="2.5"} 1',
      'converge_consumer_lag_seconds_bucket{le="10"} 1',
      'converge_consumer_lag_seconds_bucket{le="30"} 2',
      'converge_consumer_lag_seconds_count 2',
    ])
      assert.ok(text.includes(`${line}\n`), `missing: ${line}`);
  });

  it('/readyz answers 503 until ready() says so', async () => {
    let ready = false;
    const server = await serveMetrics(new prom.Registry(), { port: 0, ready: () => ready });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
    try {
      assert.equal((await fetch(url)).status, 503);
      ready = true;
      assert.equal((await fetch(url)).status, 200);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('metrics served beside a running relay and consumer', () => {
  it('serve their counters, histograms, gauges and readiness from outside the components, and stop serving on close()', async () => {
    const { db, relayOptions, consumerOptions, close } = await openBrokerFixture('cvms');
    const relay = new Relay(relayOptions());
    const consumer = new Consumer(consumerOptions({ handlers: { Counted: async () => undefined } }));
    const relayMetrics = serveRelayMetrics(relay, { port: 0 });
    const consumerMetrics = serveConsumerMetrics(consumer, { port: 0 });
    const scrape = async (served: { url: Promise<string> } | undefined, path = '/metrics') =>
      fetch(`${await served!.url}${path}`);
    try {
      consumer.start();
      await consumer.ready();
      await waitFor(
        async () => (await scrape(consumerMetrics, '/readyz')).status === 200,
        'consumer ready once subscribed',
      );
      await withTransaction(db.pool, async (tx) => {
        for (let v = 1; v <= 5; v++)
          await appendToOutbox(
            tx,
            { aggregateType: 'meter', aggregateId: 'm1', aggregateVersion: v, eventType: 'Counted', payload: { v } },
            { schema: db.schema },
          );
      });
      relay.start();
      await waitFor(
        async () =>
          /converge_consumer_deliveries_total\{outcome="applied"\} 5\n/.test(
            await (await scrape(consumerMetrics)).text(),
          ),
        'five applied events on the consumer endpoint',
      );
      const consumerText = await (await scrape(consumerMetrics)).text();
      assert.match(consumerText, /converge_consumer_lag_seconds_count 5\n/);
      assert.match(
        consumerText,
        /# TYPE converge_parked_events gauge/,
        'the reorder-buffer gauges come with the consumer',
      );
      const relayText = await (await scrape(relayMetrics)).text();
      assert.match(relayText, /converge_relay_published_total 5\n/);
      assert.match(relayText, /converge_relay_confirm_seconds_count 5\n/);
      assert.match(relayText, /converge_outbox_rows\{status="published"\} 5\n/);
      assert.match(relayText, /converge_outbox_oldest_pending_seconds 0\n/);
      assert.equal(
        (await scrape(relayMetrics, '/readyz')).status,
        200,
        'relay ready while its confirm channel is open',
      );
      const urls = [await relayMetrics.url, await consumerMetrics.url];
      await relay.stop();
      await consumer.stop();
      assert.equal((await fetch(`${urls[0]}/readyz`)).status, 503, 'a stopped relay is not ready');
      assert.equal((await fetch(`${urls[1]}/readyz`)).status, 503, 'a stopped consumer is not ready');
      await relayMetrics.close();
      await consumerMetrics.close();
      for (const url of urls) await assert.rejects(fetch(`${url}/healthz`), 'nothing listens after close()');
    } finally {
      await relay.stop();
      await consumer.stop();
      await relayMetrics.close();
      await consumerMetrics.close();
      await close();
    }
  });
});

/** The real pool, except that its queries fail as if PostgreSQL refused connections while `down`. */
function failingPool(real: pg.Pool): { pool: pg.Pool; down: boolean } {
  const outage = { down: false, pool: real };
  outage.pool = new Proxy(real, {
    get(target, key) {
      if (key === 'query' && outage.down)
        return () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return outage;
}

describe('probes and /metrics with the database out of reach', () => {
  const probe = async (served: { url: Promise<string> }, path: string) =>
    (await fetch(`${await served.url}${path}`)).status;

  it('a running relay whose database stops answering is alive but not ready, and /metrics still answers with converge_database_up 0', async () => {
    const db = await createTestSchema('cvmr');
    const outage = failingPool(db.pool);
    const relay = new Relay({
      amqpUrl: AMQP_URL,
      pool: outage.pool,
      schema: db.schema,
      exchange: 'amq.topic',
      declareExchange: false,
      logger: silentLogger,
      pollIntervalMs: 20,
      reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const errors: Error[] = [];
    relay.on('error', (err) => errors.push(err));
    const served = serveRelayMetrics(relay, { port: 0 });
    try {
      relay.start();
      await relay.ready();
      assert.equal(await probe(served, '/readyz'), 200);
      outage.down = true;
      await waitFor(() => errors.length >= 1, 'a failed cycle');
      assert.equal(relay.connected, true, 'the broker channel is kept through a database outage');
      assert.equal(await probe(served, '/healthz'), 200, 'a restart cannot bring the database back');
      assert.equal(await probe(served, '/readyz'), 503);
      const metrics = await fetch(`${await served.url}/metrics`);
      assert.equal(metrics.status, 200);
      const text = await metrics.text();
      assert.match(text, /^converge_database_up 0$/m);
      assert.match(text, /^converge_broker_connected 1$/m);
      assert.doesNotMatch(text, /converge_outbox_rows\{/, 'no made-up backlog');
      outage.down = false;
      await waitFor(async () => (await probe(served, '/readyz')) === 200, 'ready again once the database answers');
    } finally {
      await relay.stop();
      await served.close();
      await db.close();
    }
  });

  it('a relay stopped by a permanent misconfiguration answers /healthz 503', async () => {
    const relay = new Relay({
      amqpUrl: AMQP_URL,
      connectionString: DATABASE_URL,
      schema: 'cvt_never_migrated',
      exchange: 'amq.topic',
      declareExchange: false,
      logger: silentLogger,
    });
    const served = serveRelayMetrics(relay, { port: 0 });
    try {
      relay.start();
      await assert.rejects(relay.ready(), { code: 'CONVERGE_SCHEMA_NOT_MIGRATED' });
      assert.equal(await probe(served, '/healthz'), 503);
      assert.equal(await probe(served, '/readyz'), 503);
    } finally {
      await relay.stop();
      await served.close();
    }
  });

  it('a subscribed consumer turns not ready while its database does not answer, and ready again after', async () => {
    const { db, consumerOptions, close } = await openBrokerFixture('cvmd');
    const outage = failingPool(db.pool);
    const consumer = new Consumer(consumerOptions({ pool: outage.pool, handlers: { Counted: async () => undefined } }));
    const served = serveConsumerMetrics(consumer, { port: 0 });
    try {
      consumer.start();
      await consumer.ready();
      assert.equal(await probe(served, '/readyz'), 200);
      outage.down = true;
      assert.equal(await probe(served, '/readyz'), 503);
      assert.equal(await probe(served, '/healthz'), 200);
      assert.match(await (await fetch(`${await served.url}/metrics`)).text(), /^converge_database_up 0$/m);
      outage.down = false;
      assert.equal(await probe(served, '/readyz'), 200);
    } finally {
      await consumer.stop();
      await served.close();
      await close();
    }
  });
});
