import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import { registerConvergenceMetrics, serveMetrics } from '../src/index.js';
import { createTestSchema, type TestDatabase } from './support/services.js';

describe('convergence metrics', () => {
  let db: TestDatabase;
  let server: http.Server;
  let base: string;

  before(async () => {
    db = await createTestSchema('cvm');
    server = await serveMetrics(registerConvergenceMetrics({ pool: db.pool, schema: db.schema, gapAfterMs: 30_000 }), { port: 0 });
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

  it('answers /healthz and 404 elsewhere', async () => {
    assert.equal(await (await fetch(`${base}/healthz`)).text(), 'ok\n');
    assert.equal((await fetch(`${base}/nope`)).status, 404);
  });
});
