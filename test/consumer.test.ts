/**
 * The inbox consumer against the real PostgreSQL and RabbitMQ: declaration, prefetch,
 * ack-after-commit, duplicates, conflicts, quarantine, bounded and endless retries,
 * next-hop outbox events, version gaps, reconnects and graceful stop. Every test has its
 * own schema, exchange and queues and removes them afterwards.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import type amqp from 'amqplib';
import pg from 'pg';
import {
  ConfigError,
  ContentConflictError,
  PermanentError,
  TransientError,
  Relay,
  appendToOutbox,
  applyIncrement,
  applyIncrements,
  repairGaps,
  readGaps,
  silentLogger,
  startConsumer,
  withTransaction,
  type Consumer,
  type ConsumerOptions,
  type EventEnvelope,
  type EventHandler,
  type Logger,
  type Settlement,
} from '../src/index.js';
import { DEFAULT_ROUTING_KEY, DeliveryProcessor, encodeMessage, fingerprint, routingKeyFromTemplate } from '../src/testing/index.js';
import { ATTEMPT_HEADER } from '../src/inbox/index.js';
import { AMQP_URL, DATABASE_URL, connectRabbit, createTestSchema, uniqueName, waitFor, type TestDatabase } from './support/services.js';

const run = promisify(execFile);
const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
const BACKOFF = { initialDelayMs: 20, maxDelayMs: 100 };
const PROJECTION = 'order_view';
const SECRET = 'SECRET-PII-42';

// ---------------------------------------------------------------------------------------------
// Environment: one schema, one exchange, one queue (plus extras), consumers stopped on close.
// ---------------------------------------------------------------------------------------------

interface Env {
  db: TestDatabase;
  schema: string;
  pool: pg.Pool;
  connection: amqp.ChannelModel;
  channel: amqp.ConfirmChannel;
  exchange: string;
  queue: string;
  retryQueue: string;
  /** Starts a consumer on this env's queue/exchange/schema (overridable) and stops it on close. */
  start(options: Partial<ConsumerOptions>): Consumer;
  stop(consumer: Consumer): Promise<void>;
  /** Publishes an envelope (as the relay would encode it) and waits for the broker's confirm. */
  publish(envelope: EventEnvelope): Promise<Buffer>;
  /** Publishes arbitrary bytes to the exchange and waits for the confirm. */
  publishRaw(key: string, content: Buffer, options?: amqp.Options.Publish): Promise<Buffer>;
  /** queue.declare passive on a throwaway channel (a missing queue would close the channel). */
  checkQueue(name: string): Promise<amqp.Replies.AssertQueue>;
  withChannel<T>(fn: (channel: amqp.Channel) => Promise<T>): Promise<T>;
  count(sql: string, values?: unknown[]): Promise<number>;
  /** Names of extra queues this test declared, deleted (with their `.retry`) on close. */
  extraQueues: string[];
}

async function withEnv(fn: (env: Env) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvc');
  const connection = await connectRabbit();
  connection.on('error', () => undefined);
  const channel = await connection.createConfirmChannel();
  channel.on('error', () => undefined);
  const exchange = uniqueName('cvc.events');
  const queue = uniqueName('cvc.q');
  const consumers = new Set<Consumer>();
  const q = `"${db.schema}"`;
  await db.pool.query(`CREATE TABLE ${q}.applied (seq bigserial PRIMARY KEY, event_id text NOT NULL, aggregate_id text NOT NULL, amount integer NOT NULL)`);
  // The tests publish before or while the consumer declares; declaring the same durable topic exchange is idempotent.
  await channel.assertExchange(exchange, 'topic', { durable: true });

  const env: Env = {
    db,
    schema: db.schema,
    pool: db.pool,
    connection,
    channel,
    exchange,
    queue,
    retryQueue: `${queue}.retry`,
    extraQueues: [],
    start(options) {
      const consumer = startConsumer({ amqpUrl: AMQP_URL,
        queue,
        exchange,
        pool: db.pool,
        schema: db.schema,
        logger: silentLogger,
        backoff: BACKOFF,
        reconnectBackoff: BACKOFF,
        ...options,
      });
      consumers.add(consumer);
      return consumer;
    },
    async stop(consumer) {
      consumers.delete(consumer);
      await consumer.stop();
    },
    async publish(envelope) {
      const message = encodeMessage(envelope, routingKey);
      channel.publish(exchange, message.routingKey, message.content, message.options);
      await channel.waitForConfirms();
      return message.content;
    },
    async publishRaw(key, content, options = {}) {
      channel.publish(exchange, key, content, { persistent: true, contentType: 'application/json', ...options });
      await channel.waitForConfirms();
      return content;
    },
    async withChannel(work) {
      const ch = await connection.createChannel();
      ch.on('error', () => undefined);
      try {
        return await work(ch);
      } finally {
        await ch.close().catch(() => undefined);
      }
    },
    async checkQueue(name) {
      return env.withChannel((ch) => ch.checkQueue(name));
    },
    async count(sql, values = []) {
      const { rows } = await db.pool.query<{ n: string }>(sql.replaceAll('$schema', q), values);
      return Number(rows[0]?.n ?? 0);
    },
  };

  try {
    await fn(env);
  } finally {
    for (const consumer of consumers) await consumer.stop().catch(() => undefined);
    for (const name of [queue, ...env.extraQueues]) {
      await env.withChannel((ch) => ch.deleteQueue(name)).catch(() => undefined);
      await env.withChannel((ch) => ch.deleteQueue(`${name}.retry`)).catch(() => undefined);
    }
    await env.withChannel((ch) => ch.deleteExchange(exchange)).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await db.close();
  }
}

function envelope(eventId: string, aggregateId: string, version: number, payload: unknown = { delta: 1 }, eventType = 'AmountAdded'): EventEnvelope {
  return {
    eventId,
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType,
    schemaVersion: 1,
    kind: 'incremental',
    payload,
    occurredAt: new Date().toISOString(),
  };
}

/** The order projection: versioned increment plus one `applied` row per committed application. */
function applyOrder(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => {
      await tx.query(`INSERT INTO "${schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, $3)`, [
        event.eventId,
        event.aggregateId,
        (event.payload as { delta: number }).delta,
      ]);
    });
  };
}

interface Gate {
  promise: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

function collect(consumer: Consumer): Settlement[] {
  const settled: Settlement[] = [];
  consumer.on('settled', (s) => settled.push(s));
  return settled;
}

interface QuarantineRow {
  id: string;
  consumer: string;
  event_id: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  exchange: string | null;
  routing_key: string | null;
  properties: { messageId?: string; headers?: Record<string, unknown> } & Record<string, unknown>;
  body: Buffer;
  quarantined_at: Date;
  resolved_at: Date | null;
  event_type: string | null;
  schema_version: number | null;
  failure_class: string | null;
  attempts: number;
  times_seen: number;
  last_seen_at: Date;
}

async function quarantineRows(env: Env): Promise<QuarantineRow[]> {
  const { rows } = await env.pool.query<QuarantineRow>(`SELECT * FROM "${env.schema}".quarantine ORDER BY id`);
  return rows;
}

/** A logger that keeps every record, to check what reaches the logs. */
function capturingLogger(): Logger & { records: string[] } {
  const records: string[] = [];
  const keep = (obj: object, msg: string) => void records.push(JSON.stringify({ ...obj, msg }));
  return { records, debug: keep, info: keep, warn: keep, error: keep };
}

async function rabbitctl(...args: string[]): Promise<string> {
  const { stdout } = await run('rabbitmqctl', ['-q', ...args], { timeout: 30_000 });
  return stdout;
}

/** pids of the broker connections whose client-provided connection_name is `name`. */
async function connectionPids(name: string): Promise<string[]> {
  const out = await rabbitctl('list_connections', 'pid', 'client_properties');
  return out
    .split('\n')
    .filter((line) => line.includes(`{"connection_name","${name}"}`))
    .map((line) => line.split('\t')[0]!.trim());
}

// ---------------------------------------------------------------------------------------------

describe('consumer configuration', () => {
  test('invalid options throw ConfigError naming the field, before anything connects', () => {
    const handlers = { AmountAdded: async () => undefined };
    const cases: [string, unknown][] = [
      ['handlers', { queue: 'orders' }],
      ['handlers', { queue: 'orders', handlers: {} }],
      ['queue', { queue: '', handlers }],
      ['queue', { queue: 'has space', handlers }],
      ['prefetch', { queue: 'orders', handlers, prefetch: 0 }],
      ['prefetch', { queue: 'orders', handlers, prefetch: 1.5 }],
      ['schema', { queue: 'orders', handlers, schema: 'Bad-Schema' }],
      ['maxAttempts', { queue: 'orders', handlers, maxAttempts: 0 }],
    ];
    for (const [field, options] of cases) {
      assert.throws(
        () => startConsumer({ logger: silentLogger, ...(options as ConsumerOptions) }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, `expected ConfigError for ${JSON.stringify(options)}, got ${String(err)}`);
          assert.equal(err.field, field);
          assert.equal(err.code, 'CONVERGE_INVALID_CONFIG');
          assert.match(err.message, new RegExp(`"${field}"`));
          return true;
        },
      );
    }
  });

  test('an unreachable broker reports errors and stop() still returns promptly', async () => {
    const consumer = startConsumer({
      queue: uniqueName('cvc.unreachable'),
      amqpUrl: 'amqp://guest:guest@127.0.0.1:1',
      connectionString: DATABASE_URL,
      handlers: { AmountAdded: async () => undefined },
      logger: silentLogger,
      reconnectBackoff: { initialDelayMs: 10, maxDelayMs: 20 },
    });
    const errors: Error[] = [];
    consumer.on('error', (err) => errors.push(err));
    await waitFor(() => errors.length >= 2, 'two failed connection attempts');
    const started = Date.now();
    await consumer.stop();
    assert.ok(Date.now() - started < 2000, `stop took ${Date.now() - started} ms`);
    assert.ok(errors.every((err) => /ECONNREFUSED/.test(`${(err as { code?: string }).code} ${err.message}`)), errors.map(String).join('; '));
  });
});

describe('consumer against PostgreSQL and RabbitMQ', () => {
  test('declares a durable queue bound to the exchange and a dead-lettering <queue>.retry', async () => {
    await withEnv(async (env) => {
      const seen: string[] = [];
      const consumer = env.start({ handlers: { AmountAdded: async (event) => void seen.push(event.eventId) } });
      await consumer.ready();

      const main = await env.checkQueue(env.queue);
      assert.equal(main.queue, env.queue);
      assert.equal(main.consumerCount, 1, 'the consumer is subscribed to the main queue');
      const retry = await env.checkQueue(env.retryQueue);
      assert.equal(retry.queue, env.retryQueue);
      assert.equal(retry.consumerCount, 0, 'nobody consumes the retry queue: copies only expire back');

      // Durable (a non-durable redeclaration is refused) and the retry queue dead-letters to the main queue.
      await assert.rejects(env.withChannel((ch) => ch.assertQueue(env.queue, { durable: false })), /PRECONDITION/);
      await env.withChannel((ch) =>
        ch.assertQueue(env.retryQueue, { durable: true, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': env.queue } }),
      );
      await assert.rejects(
        env.withChannel((ch) =>
          ch.assertQueue(env.retryQueue, { durable: true, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'elsewhere' } }),
        ),
        /PRECONDITION/,
      );
      await assert.rejects(env.withChannel((ch) => ch.assertExchange(env.exchange, 'fanout', { durable: true })), /PRECONDITION/);

      // Bound: an event published to the exchange reaches the handler.
      await env.publish(envelope('E1', 'o1', 1));
      await waitFor(() => seen.includes('E1'), 'the event to reach the handler through the binding');
    });
  });

  test('prefetch bounds the unacknowledged deliveries while the handler is blocked', async () => {
    await withEnv(async (env) => {
      const gates = Array.from({ length: 5 }, gate);
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        prefetch: 2,
        handlers: {
          AmountAdded: async (event, ctx) => {
            const mine = gates[calls++]!;
            await mine.promise;
            await apply(event, ctx);
          },
        },
      });
      try {
        await consumer.ready();
        for (let i = 1; i <= 5; i++) await env.publish(envelope(`E${i}`, `o${i}`, 1));

        await waitFor(() => calls === 1, 'the first delivery to reach the handler');
        await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 3, 'two deliveries taken, three ready');
        for (let i = 0; i < 10; i++) {
          const { messageCount } = await env.checkQueue(env.queue);
          assert.equal(messageCount, 3, 'never more than prefetch (2) deliveries are out');
          assert.equal(calls, 1, 'deliveries are processed one at a time');
        }

        gates[0]!.open();
        await waitFor(() => calls === 2, 'the second delivery to start once the first committed');
        await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 2, 'the freed slot to be refilled');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1);

        for (const g of gates) g.open();
        await waitFor(async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied`)) === 5, 'all five to apply');
        await waitFor(() => consumer.stats.applied === 5, 'all five to be settled');
      } finally {
        for (const g of gates) g.open();
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'all five were acked');
      assert.equal(calls, 5);
    });
  });

  test('acks only after commit: blocked in the transaction → unacked and invisible; released → committed and acked', async () => {
    await withEnv(async (env) => {
      const entered = gate();
      const release = gate();
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, ctx) => {
            await apply(event, ctx); // inbox row and projection written, not committed
            entered.open();
            await release.promise;
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 7 }));
        await entered.promise;

        const queued = await env.checkQueue(env.queue);
        assert.equal(queued.messageCount, 0, 'the delivery left the ready list');
        const listing = await rabbitctl('list_queues', 'name', 'messages_unacknowledged');
        const line = listing.split('\n').find((l) => l.split('\t')[0] === env.queue);
        assert.equal(line?.split('\t')[1]?.trim(), '1', `one unacknowledged delivery while the transaction is open (${line})`);

        // A separate connection sees nothing of the open transaction.
        const other = new pg.Client({ connectionString: DATABASE_URL });
        await other.connect();
        try {
          const inbox = await other.query(`SELECT 1 FROM "${env.schema}".inbox WHERE event_id = 'E1'`);
          const applied = await other.query(`SELECT 1 FROM "${env.schema}".applied`);
          assert.equal(inbox.rowCount, 0, 'inbox row not visible before commit');
          assert.equal(applied.rowCount, 0, 'projection write not visible before commit');
        } finally {
          await other.end();
        }
        assert.equal(settled.length, 0, 'nothing settled while the transaction is open');

        release.open();
        await waitFor(() => settled.length === 1, 'the delivery to settle');
        assert.deepEqual({ ...settled[0], occurredAt: undefined }, { action: 'ack', outcome: 'applied', eventId: 'E1', occurredAt: undefined });
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`), 1, 'inbox row committed');
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 7);
      } finally {
        release.open();
        await env.stop(consumer);
      }
      // An unacked delivery would be back in the ready list once the consumer's channel closed.
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked');
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0, 'never parked');
    });
  });

  test('the same event delivered again (same fingerprint, even re-encoded) runs the handler once', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({ handlers: { AmountAdded: async (event, ctx) => void (calls++, await apply(event, ctx)) } });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const event = envelope('E1', 'o1', 1, { delta: 5, note: { b: 2, a: 1 } });
        await env.publish(event);
        await env.publish(event);
        // Another producer's encoding: keys in another order, other spacing, another occurredAt.
        const reordered = `{ "payload": {"note": {"a": 1, "b": 2}, "delta": 5}, "occurredAt": "2020-01-01T00:00:00.000Z", "kind": "incremental",
          "schemaVersion": 1, "eventType": "AmountAdded", "aggregateVersion": 1, "aggregateId": "o1", "aggregateType": "order", "eventId": "E1" }`;
        await env.publishRaw('order.AmountAdded', Buffer.from(reordered), { messageId: 'E1' });

        await waitFor(() => settled.length === 3, 'three deliveries to settle');
        assert.deepEqual(
          settled.map((s) => (s.action === 'ack' ? s.outcome : s.action)),
          ['applied', 'duplicate', 'duplicate'],
        );
        assert.equal(calls, 1, 'the handler ran once');
        assert.equal(consumer.stats.applied, 1);
        assert.equal(consumer.stats.duplicate, 2);
        assert.equal(consumer.stats.quarantined, 0);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 1);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 5);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'duplicates are acked');
    });
  });

  test('same eventId with other content: conflict event, quarantine row with the raw delivery, nothing applied', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({ consumer: 'orders-view', handlers: { AmountAdded: async (event, ctx) => void (calls++, await apply(event, ctx)) } });
      const conflicts: ContentConflictError[] = [];
      consumer.on('conflict', (err) => conflicts.push(err));
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const original = envelope('E1', 'o1', 1, { delta: 10 });
        await env.publish(original);
        await waitFor(() => consumer.stats.applied === 1, 'the original to apply');

        const impostor = envelope('E1', 'o1', 1, { delta: 99 });
        const before = new Date();
        const sent = await env.publish(impostor);
        await waitFor(() => conflicts.length === 1, 'the conflict event');

        const err = conflicts[0]!;
        assert.ok(err instanceof ContentConflictError);
        assert.equal(err.code, 'CONVERGE_CONTENT_CONFLICT');
        assert.equal(err.eventId, 'E1');
        assert.equal(err.consumer, 'orders-view');
        assert.equal(err.storedFingerprint, fingerprint(original));
        assert.equal(err.receivedFingerprint, fingerprint(impostor));
        assert.ok(!err.message.includes('99'), 'the message names ids, not payload values');

        const last = settled.at(-1)!;
        assert.ok(last.action === 'ack' && last.outcome === 'quarantined' && last.reason === 'content-conflict');
        assert.equal(consumer.stats.quarantined, 1);

        const rows = await quarantineRows(env);
        assert.equal(rows.length, 1);
        const row = rows[0]!;
        assert.equal(row.consumer, 'orders-view');
        assert.equal(row.event_id, 'E1');
        assert.equal(row.reason, 'content-conflict');
        assert.equal(row.fingerprint, fingerprint(impostor));
        assert.equal(row.exchange, env.exchange);
        assert.equal(row.routing_key, 'order.AmountAdded');
        assert.ok(Buffer.isBuffer(row.body) && row.body.equals(sent), 'the raw body is kept byte for byte');
        assert.equal(row.properties.messageId, 'E1');
        assert.equal(row.properties.type, 'AmountAdded');
        assert.equal(row.properties.headers?.['x-aggregate-id'], 'o1');
        assert.equal(row.properties.headers?.['x-aggregate-version'], 1);
        assert.ok(row.quarantined_at instanceof Date && row.quarantined_at.getTime() >= before.getTime() - 5000);
        assert.equal(row.resolved_at, null);

        assert.equal(calls, 1, 'the handler never saw the conflicting copy');
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 10, 'nothing of the impostor applied');
        const { rows: inbox } = await env.pool.query(`SELECT fingerprint FROM "${env.schema}".inbox WHERE consumer = 'orders-view'`);
        assert.deepEqual(inbox, [{ fingerprint: fingerprint(original) }], 'the inbox keeps the original fingerprint');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'the conflicting delivery was acked');
    });
  });

  test('invalid envelopes are quarantined without leaking the payload into detail or logs, and acked', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const logger = capturingLogger();
      const consumer = env.start({ logger, maxEnvelopeBytes: 2048, handlers: { AmountAdded: async () => void calls++ } });
      try {
        await consumer.ready();
        const bodies = new Map<string, Buffer>();
        const send = async (label: string, content: Buffer) =>
          bodies.set(label, await env.publishRaw('order.AmountAdded', content, { messageId: `M-${label}`, headers: { 'x-test-case': label } }));

        const { aggregateId: _dropped, ...missing } = envelope('E-missing', 'o1', 1, { card: SECRET });
        await send('missing-field', Buffer.from(JSON.stringify(missing)));
        await send('not-json', Buffer.from(`{"eventId":"E-broken","payload":{"card":"${SECRET}"`));
        await send('too-large', Buffer.from(JSON.stringify(envelope('E-large', 'o1', 1, { card: SECRET, filler: 'x'.repeat(4000) }))));
        await send('wrong-type', Buffer.from(JSON.stringify({ ...envelope('E-type', 'o1', 1, { card: SECRET }), aggregateVersion: SECRET })));

        await waitFor(() => consumer.stats.quarantined === 4, 'four quarantined deliveries');
        const rows = await quarantineRows(env);
        assert.equal(rows.length, 4);
        const byCase = new Map(rows.map((r) => [String(r.properties.headers?.['x-test-case']), r]));
        const expectations: [string, string, RegExp][] = [
          ['missing-field', 'invalid-envelope', /"aggregateId"/],
          ['not-json', 'malformed-body', /"\(body\)".*not valid JSON/],
          ['too-large', 'body-too-large', /"\(body\)".*exceeds limit of 2048/],
          ['wrong-type', 'invalid-envelope', /"aggregateVersion".*expected number/],
        ];
        for (const [label, reason, detail] of expectations) {
          const row = byCase.get(label);
          assert.ok(row, `a quarantine row for ${label}`);
          assert.equal(row.reason, reason, label);
          assert.match(row.detail, detail, label);
          assert.ok(!row.detail.includes(SECRET), `${label}: detail must not quote the payload (${row.detail})`);
          assert.equal(row.event_id, null, `${label}: no trusted eventId`);
          assert.equal(row.fingerprint, null, label);
          assert.equal(row.properties.messageId, `M-${label}`);
          assert.ok(row.body.equals(bodies.get(label)!), `${label}: raw body kept for a person`);
        }
        assert.equal(calls, 0, 'no handler ran');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0);
        assert.ok(logger.records.length >= 4, 'the quarantines were logged');
        for (const record of logger.records) assert.ok(!record.includes(SECRET), `log line leaks the payload: ${record}`);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'quarantined deliveries are acked');
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0, 'and never parked for retry');
    });
  });

  test("unknown event types: quarantined by default, acked without trace with 'ignore', caught by '*'", async () => {
    await withEnv(async (env) => {
      let known = 0;
      const handlers = { AmountAdded: async () => void known++ };

      const strict = env.start({ handlers });
      await strict.ready();
      await env.publish(envelope('U1', 'o1', 1, {}, 'OrderShipped'));
      await waitFor(() => strict.stats.quarantined === 1, 'the unknown type to be quarantined');
      await env.stop(strict);
      const [row, ...more] = await quarantineRows(env);
      assert.equal(more.length, 0);
      assert.equal(row!.reason, 'unknown-event-type');
      assert.equal(row!.event_id, 'U1');
      assert.match(row!.detail, /no handler for eventType OrderShipped/);
      assert.equal(row!.consumer, env.queue, 'the consumer name defaults to the queue');
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked after quarantine');

      const lenient = env.start({ handlers, unknownEventType: 'ignore' });
      const settled = collect(lenient);
      await lenient.ready();
      await env.publish(envelope('U2', 'o1', 1, {}, 'OrderShipped'));
      await waitFor(() => lenient.stats.ignored === 1, 'the unknown type to be ignored');
      await env.stop(lenient);
      assert.deepEqual(settled, [{ action: 'ack', outcome: 'ignored', eventId: 'U2' }]);
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'ignored deliveries are acked');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'no inbox row for an ignored event');
      assert.equal((await quarantineRows(env)).length, 1, 'no new quarantine row');

      const seen: string[] = [];
      const catchAll = env.start({ handlers: { ...handlers, '*': async (event) => void seen.push(event.eventType) } });
      await catchAll.ready();
      await env.publish(envelope('U3', 'o1', 1, {}, 'OrderShipped'));
      await env.publish(envelope('K1', 'o1', 1, { delta: 1 }));
      await waitFor(() => catchAll.stats.applied === 2, "both to apply, one through '*'");
      await env.stop(catchAll);
      assert.deepEqual(seen, ['OrderShipped']);
      assert.equal(known, 1, 'a type with its own handler does not go to *');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id IN ('U3', 'K1')`), 2);
    });
  });

  test('a handler that always fails is retried through <queue>.retry and quarantined after maxAttempts', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const consumer = env.start({
        maxAttempts: 3,
        handlers: {
          AmountAdded: async (event, { tx, attempt }) => {
            attempts.push(attempt);
            await tx.query(`INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, 1)`, [event.eventId, event.aggregateId]);
            throw new Error('downstream rejected the order');
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.quarantined === 1, 'the delivery to be quarantined');

        assert.deepEqual(attempts, [1, 2, 3], 'the handler ran exactly maxAttempts times with growing attempt numbers');
        assert.deepEqual(
          settled.map((s) => (s.action === 'retry' ? `retry:${s.attempt}:${s.reason}` : s.outcome === 'quarantined' ? `quarantined:${s.reason}` : s.outcome)),
          ['retry:1:handler-error', 'retry:2:handler-error', 'quarantined:handler-failed'],
        );
        assert.equal(consumer.stats.retried, 2);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'no inbox row was ever committed');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 0, 'every attempt rolled back');

        const [row, ...more] = await quarantineRows(env);
        assert.equal(more.length, 0);
        assert.equal(row!.reason, 'handler-failed');
        assert.deepEqual([row!.failure_class, row!.attempts, row!.event_type, row!.schema_version, row!.times_seen], ['exhausted', 3, 'AmountAdded', 1, 1]);
        assert.equal(row!.event_id, 'E1');
        assert.match(row!.detail, /after 3 attempts/);
        assert.match(row!.detail, /downstream rejected the order/);
        // The quarantined copy is the one that came back from the retry queue.
        const headers = row!.properties.headers ?? {};
        assert.equal(headers[ATTEMPT_HEADER], 2, 'the third delivery carried the attempt counter of the second');
        const deaths = headers['x-death'] as { queue: string; reason: string }[] | undefined;
        assert.ok(Array.isArray(deaths) && deaths.some((d) => d.queue === env.retryQueue && d.reason === 'expired'), JSON.stringify(deaths));
        assert.equal(row!.properties.messageId, 'E1', 'the copy kept the messageId');
        // After the first trip the delivery's routing key is the queue name (dead-lettered via the default
        // exchange); the header must keep the routing key the event was first published with.
        assert.equal(headers['x-converge-original-routing-key'], 'order.AmountAdded', 'original routing key survives a second retry');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0, 'nothing left waiting');
    });
  });

  test('a serialization failure re-runs the whole transaction in-process: handler twice, applied once', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, ctx) => {
            attempts.push(ctx.attempt);
            await apply(event, ctx);
            if (attempts.length === 1) throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' });
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const sent = envelope('E1', 'o1', 1, { delta: 3 });
        await env.publish(sent);
        await waitFor(() => settled.length === 1, 'the delivery to settle');
        assert.deepEqual(settled[0], { action: 'ack', outcome: 'applied', eventId: 'E1', occurredAt: sent.occurredAt });
        assert.deepEqual(attempts, [1, 1], 'same delivery, transaction run twice');
        assert.equal(consumer.stats.retried, 0, 'no trip through the retry queue');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 1);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1, 'the first run rolled back completely');
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a handler chooses: PermanentError is quarantined on the first attempt, TransientError waits past maxAttempts; neither message reaches the logs', async () => {
    await withEnv(async (env) => {
      const logger = capturingLogger();
      let transientLeft = 4;
      const consumer = env.start({
        logger,
        maxAttempts: 2,
        handlers: {
          AmountAdded: async (event, context) => {
            if (event.aggregateId === 'closed') throw new PermanentError(`order closed for ${SECRET}`);
            if (transientLeft-- > 0) throw new TransientError(`search down, token ${SECRET}`);
            await applyOrder(env.schema)(event, context);
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('P1', 'closed', 1));
        await env.publish(envelope('T1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1 && consumer.stats.quarantined === 1, 'P1 quarantined and T1 applied');
        const forP1 = settled.filter((s) => s.eventId === 'P1');
        assert.deepEqual(forP1.map((s) => (s.action === 'ack' && s.outcome === 'quarantined' ? s.reason : s.action)), ['handler-permanent'], 'no retry at all');
        const forT1 = settled.filter((s) => s.eventId === 'T1').map((s) => (s.action === 'retry' ? s.reason : s.action === 'ack' ? s.outcome : ''));
        assert.deepEqual(forT1, ['handler-transient', 'handler-transient', 'handler-transient', 'handler-transient', 'applied'], 'four waits, more than maxAttempts 2');
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'handler-permanent');
        assert.match(row!.detail, /order closed/, "the handler's message is kept for a person in the quarantine row");
        for (const record of logger.records) assert.ok(!record.includes(SECRET), `log line leaks the handler's message: ${record}`);
        assert.ok(logger.records.some((r) => r.includes('CONVERGE_TRANSIENT')), 'the retries are logged by code');
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('upcasters give handlers the current shape; a newer schema version is quarantined, and duplicates compare what was sent', async () => {
    await withEnv(async (env) => {
      const seen: unknown[] = [];
      const consumer = env.start({
        schemas: { AmountAdded: { current: 2, upcasters: { 1: (p) => ({ deltaCents: (p as { delta: number }).delta * 100 }) } } },
        handlers: { AmountAdded: async (event) => void seen.push([event.eventId, event.schemaVersion, event.payload]) },
      });
      try {
        await consumer.ready();
        await env.publish(envelope('V1', 'o1', 1, { delta: 3 }));
        await env.publish(envelope('V1', 'o1', 1, { delta: 3 }));
        await env.publish({ ...envelope('V2', 'o2', 1, { deltaCents: 700 }), schemaVersion: 2 });
        await env.publish({ ...envelope('V3', 'o3', 1, { cents: 1 }), schemaVersion: 3 });
        await waitFor(() => consumer.stats.applied === 2 && consumer.stats.duplicate === 1 && consumer.stats.quarantined === 1, 'two applied, one duplicate, one quarantined');
        assert.deepEqual(seen, [['V1', 2, { deltaCents: 300 }], ['V2', 2, { deltaCents: 700 }]]);
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'unsupported-schema-version');
        assert.equal(JSON.parse(row!.body.toString()).schemaVersion, 3, 'the raw body keeps its original version for a replay after an upgrade');
        const stored = await env.pool.query<{ fingerprint: string }>(`SELECT fingerprint FROM "${env.schema}".inbox WHERE event_id = 'V1'`);
        assert.equal(stored.rows[0]!.fingerprint, fingerprint(envelope('V1', 'o1', 1, { delta: 3 })), 'fingerprint of the event as sent');
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('an outage-like error keeps retrying past maxAttempts and never quarantines', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        maxAttempts: 2,
        handlers: {
          AmountAdded: async (event, ctx) => {
            attempts.push(ctx.attempt);
            // 4 runs per delivery (withTransaction retries 3 times): fail for the first three deliveries.
            if (attempts.length <= 12) throw Object.assign(new Error('could not serialize access'), { code: '40001' });
            await apply(event, ctx);
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the delivery to apply eventually');
        assert.deepEqual(attempts, [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4]);
        assert.deepEqual(
          settled.map((s) => (s.action === 'retry' ? s.reason : s.outcome)),
          ['database-unavailable', 'database-unavailable', 'database-unavailable', 'applied'],
        );
        assert.equal(consumer.stats.quarantined, 0, 'attempt 4 > maxAttempts 2, still not given up');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a next-hop outbox event commits only with the handler, and once', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const secondAttempt = gate();
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, { tx, attempt, schema }) => {
            attempts.push(attempt);
            if (attempt > 1) await secondAttempt.promise; // hold the retry until the first outcome is checked
            await appendToOutbox(
              tx,
              { eventId: `${event.eventId}:sms`, aggregateType: 'notification', aggregateId: event.aggregateId, aggregateVersion: 1, eventType: 'SmsRequested', payload: { order: event.aggregateId } },
              { schema },
            );
            if (attempt === 1) throw new Error('sms template service unavailable');
          },
        },
      });
      const settled = collect(consumer);
      const outboxRows = () => env.count(`SELECT count(*) AS n FROM $schema.outbox`);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => settled.length >= 1, 'the first attempt to settle');
        assert.equal(settled[0]!.action, 'retry');
        assert.equal(await outboxRows(), 0, 'the failed attempt left no next-hop event');
        secondAttempt.open();

        await waitFor(() => consumer.stats.applied === 1, 'the second attempt to commit');
        assert.deepEqual(attempts, [1, 2]);
        const { rows } = await env.pool.query(`SELECT event_id, event_type, status FROM "${env.schema}".outbox`);
        assert.deepEqual(rows, [{ event_id: 'E1:sms', event_type: 'SmsRequested', status: 'pending' }]);

        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.duplicate === 1, 'the redelivered copy to be recognised');
        assert.equal(await outboxRows(), 1, 'a duplicate adds no second next-hop event');
        assert.deepEqual(attempts, [1, 2], 'the handler did not run for the duplicate');
      } finally {
        secondAttempt.open();
        await env.stop(consumer);
      }
    });
  });

  test('end to end: outbox → relay → consumer → next-hop outbox → relay → second consumer', async () => {
    await withEnv(async (env) => {
      const smsQueue = uniqueName('cvc.sms');
      env.extraQueues.push(smsQueue);
      const apply = applyOrder(env.schema);
      const orders = env.start({
        bindings: ['order.#'],
        handlers: {
          AmountAdded: async (event, ctx) => {
            await apply(event, ctx);
            await appendToOutbox(
              ctx.tx,
              { eventId: `${event.eventId}:sms`, aggregateType: 'notification', aggregateId: event.aggregateId, aggregateVersion: 1, eventType: 'SmsRequested', payload: {} },
              { schema: ctx.schema },
            );
          },
        },
      });
      const received: EventEnvelope[] = [];
      const sms = env.start({ queue: smsQueue, bindings: ['notification.#'], handlers: { SmsRequested: async (event) => void received.push(event) } });
      const relay = new Relay({ amqpUrl: AMQP_URL, pool: env.pool, schema: env.schema, exchange: env.exchange, logger: silentLogger, pollIntervalMs: 20 }).start();
      try {
        await Promise.all([orders.ready(), sms.ready()]);
        const { eventId } = await withTransaction(env.pool, (tx) =>
          appendToOutbox(tx, { aggregateType: 'order', aggregateId: 'o9', aggregateVersion: 1, eventType: 'AmountAdded', payload: { delta: 4 } }, { schema: env.schema }),
        );
        await waitFor(() => received.length === 1, 'the next hop to reach the second consumer');
        assert.equal(received[0]!.eventId, `${eventId}:sms`);
        assert.equal(orders.stats.applied, 1);
        assert.equal(orders.stats.quarantined, 0, 'the order queue never saw the notification');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE consumer = $1`, [smsQueue]), 1);
        await waitFor(async () => (await env.count(`SELECT count(*) AS n FROM $schema.outbox WHERE status = 'published'`)) === 2, 'both outbox rows marked published');
      } finally {
        await relay.stop();
      }
    });
  });

  test('without the reorder buffer a version gap sends the later event through the retry queue; with prefetch 1 both still apply in order', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, reorderBuffer: false, handlers: { AmountAdded: applyOrder(env.schema) } });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 2, 'both events to apply');
        const { rows } = await env.pool.query<{ event_id: string }>(`SELECT event_id FROM "${env.schema}".applied ORDER BY seq`);
        assert.deepEqual(rows.map((r) => r.event_id), ['E1', 'E2'], 'applied in version order');
        assert.ok(
          settled.some((s) => s.action === 'retry' && s.eventId === 'E2' && s.reason === 'version-gap'),
          'E2 waited as a version gap',
        );
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 2);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 30);
        assert.equal(consumer.stats.quarantined, 0);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0);
    });
  });

  test('the same message quarantined again while its row is open updates that row: times seen and last seen', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await env.publish(envelope('E1', 'o1', 1, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the first conflicting copy quarantined');
        await env.publish(envelope('E1', 'o1', 1, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 2, 'the second identical conflicting copy quarantined');
        await env.publish(envelope('E1', 'o1', 1, { delta: 77 }));
        await waitFor(() => consumer.stats.quarantined === 3, 'a third, different content');
        const rows = await quarantineRows(env);
        assert.deepEqual(rows.map((r) => [r.reason, r.failure_class, r.times_seen]), [['content-conflict', 'permanent', 2], ['content-conflict', 'permanent', 1]]);
        assert.ok(rows[0]!.last_seen_at.getTime() >= rows[0]!.quarantined_at.getTime());
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a different event claiming an applied version is quarantined as stale-version', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await env.publish(envelope('E1-other', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the stale event to be quarantined');
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'stale-version');
        assert.equal(row!.event_id, 'E1-other');
        assert.equal(consumer.stats.retried, 0, 'waiting cannot help, so no retry');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1-other'`), 0);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 10);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('reconnects after the broker closes its connection and keeps consuming', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      const errors: Error[] = [];
      consumer.on('error', (err) => errors.push(err));
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event before the cut');

        const name = `converge-consumer ${env.queue}`;
        const [pid, ...others] = await connectionPids(name);
        assert.ok(pid, 'the consumer connection is visible to the broker under its connection_name');
        assert.equal(others.length, 0);
        await rabbitctl('close_connection', pid, 'test');
        const fresh = await waitFor(async () => {
          const pids = await connectionPids(name);
          return pids.length === 1 && pids[0] !== pid ? pids[0] : undefined;
        }, 'a new consumer connection');
        assert.notEqual(fresh, pid);

        await env.publish(envelope('E2', 'o1', 2));
        await waitFor(() => consumer.stats.applied === 2, 'the event published after the reconnect');
        assert.equal((await env.checkQueue(env.queue)).consumerCount, 1, 'exactly one subscription after reconnecting');
        assert.deepEqual(errors, [], 'a broker-side close is not reported as a failure');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
    });
  });

  test('a crash between commit and ack (afterCommit hook) leaves the delivery unacked; the redelivery is a duplicate', async () => {
    await withEnv(async (env) => {
      let crashes = 0;
      const consumer = env.start({
        handlers: { AmountAdded: applyOrder(env.schema) },
        hooks: { afterCommit: () => { if (crashes++ === 0) throw new Error('crash after commit'); } },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 5 }));
        await waitFor(() => settled.some((s) => s.action === 'ack' && s.outcome === 'duplicate'), 'the redelivered copy to be recognised');
        assert.deepEqual(settled.map((s) => s.action === 'ack' && s.outcome), ['duplicate'], 'the first settlement was never reported: the process "died" before the ack');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`), 1);
        assert.equal(consumer.stats.applied, 0, 'stats count settlements reported after the ack');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked at last');
    });
  });

  test('after the broker connection is lost, the backlog is processed at a rate that starts low (ramp-up)', async () => {
    await withEnv(async (env) => {
      // A long step keeps the limit at its initial 40/s for the whole test.
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) }, rampUp: { initialPerSecond: 40, stepMs: 60_000 } });
      const limits: (number | null)[] = [];
      let recoveredAt = 0;
      let appliedAtRecovery = 0;
      consumer.on('recovering', (limit) => {
        limits.push(limit);
        recoveredAt = performance.now();
        appliedAtRecovery = consumer.stats.applied;
      });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event, at full speed');
        assert.deepEqual(limits, [], 'no limit on the first connection');

        const name = `converge-consumer ${env.queue}`;
        const [pid] = await connectionPids(name);
        await rabbitctl('close_connection', pid!, 'test');
        for (let v = 2; v <= 81; v++) await env.publish(envelope(`E${v}`, `o${v}`, 1));
        await waitFor(() => limits.length > 0, 'the new session to begin the ramp');
        assert.deepEqual(limits, [40]);
        await waitFor(() => consumer.stats.applied === 81, 'the whole backlog', 30_000);
        const seconds = (performance.now() - recoveredAt) / 1000;
        const afterRecovery = 81 - appliedAtRecovery;
        // A token bucket at 40/s with a burst of 4 takes at least (n - 4) / 40 seconds for n events.
        assert.ok(afterRecovery >= 60, `most of the backlog came after the reconnect (${afterRecovery})`);
        assert.ok(seconds >= (afterRecovery - 4) / 40, `${afterRecovery} events in ${seconds.toFixed(2)} s exceed 40/s`);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('terminated idle database connections do not lose the next delivery', async () => {
    await withEnv(async (env) => {
      const app = uniqueName('cvc_pg');
      const pool = new pg.Pool({ connectionString: DATABASE_URL, application_name: app, max: 3 });
      const poolErrors: Error[] = [];
      pool.on('error', (err) => poolErrors.push(err));
      const consumer = env.start({ pool, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event');
        const killed = await env.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [app]);
        assert.ok((killed.rowCount ?? 0) >= 1, 'the consumer had a backend to terminate');
        await waitFor(() => poolErrors.length >= 1, 'the pool to notice the dead connection');

        await env.publish(envelope('E2', 'o1', 2));
        await waitFor(() => consumer.stats.applied === 2, 'the next delivery to apply on a new connection');
        assert.equal(consumer.stats.quarantined, 0);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 2);
      } finally {
        await env.stop(consumer);
        await pool.end();
      }
    });
  });

  test('a database connection terminated mid-transaction leads to a retry, never a crash or a loss', async () => {
    await withEnv(async (env) => {
      const app = uniqueName('cvc_pg');
      const pool = new pg.Pool({ connectionString: DATABASE_URL, application_name: app, max: 3 });
      pool.on('error', () => undefined);
      const entered = gate();
      const release = gate();
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        pool,
        handlers: {
          AmountAdded: async (event, ctx) => {
            calls++;
            await apply(event, ctx);
            if (calls === 1) {
              entered.open();
              await release.promise; // e.g. awaiting an HTTP call while the database fails over
            }
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 2 }));
        await entered.promise;
        const killed = await env.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, [app]);
        assert.equal(killed.rowCount, 1, "the consumer's open transaction was terminated");
        release.open();

        await waitFor(() => consumer.stats.applied === 1, 'the retried delivery to apply');
        const first = settled[0]!;
        assert.ok(first.action === 'retry' && first.reason === 'database-unavailable', JSON.stringify(first));
        assert.equal(calls, 2);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 2, 'applied exactly once');
        assert.equal(consumer.stats.quarantined, 0);
      } finally {
        release.open();
        await env.stop(consumer);
        await pool.end();
      }
    });
  });

  test('stop() lets the delivery in progress commit and ack, and takes no new one', async () => {
    await withEnv(async (env) => {
      const entered = gate();
      const release = gate();
      const apply = applyOrder(env.schema);
      let calls = 0;
      const consumer = env.start({
        prefetch: 1,
        handlers: {
          AmountAdded: async (event, ctx) => {
            calls++;
            await apply(event, ctx);
            entered.open();
            await release.promise;
          },
        },
      });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1));
      await entered.promise;
      await env.publish(envelope('E2', 'o2', 1)); // held back by prefetch 1

      let stopped = false;
      const stopping = env.stop(consumer).then(() => void (stopped = true));
      // stop() cancels the subscription first; only then does it wait for the handler.
      await waitFor(async () => (await env.checkQueue(env.queue)).consumerCount === 0, 'the subscription to be cancelled');
      assert.equal(stopped, false, 'stop() waits for the transaction in progress');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'not committed yet');

      release.open();
      await stopping;
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`), 1, 'committed before stop() returned');
      assert.equal(consumer.stats.applied, 1);
      assert.equal(calls, 1, 'no new delivery taken while stopping');
      const queued = await env.checkQueue(env.queue);
      assert.equal(queued.messageCount, 1, 'E1 acked (not back in the queue); E2 still waiting for the next consumer');
      assert.equal(queued.consumerCount, 0);
    });
  });
});

describe('batches', () => {
  test('one transaction per batch keeps every delivery’s own outcome, and a failing event never takes the others down', async () => {
    await withEnv(async (env) => {
      await env.withChannel(async (ch) => {
        await ch.assertQueue(env.queue, { durable: true });
        await ch.bindQueue(env.queue, env.exchange, '#');
      });
      const calls: string[] = [];
      const processor = new DeliveryProcessor({
        consumer: 'batch-test',
        pool: env.pool,
        schema: env.schema,
        logger: silentLogger,
        handlers: {
          AmountAdded: async (event, context) => {
            calls.push(event.eventId);
            if (event.aggregateId === 'poison') throw new Error('handler bug');
            await applyOrder(env.schema)(event, context);
          },
        },
      });
      try {
        const sent = [
          envelope('A2', 'a', 2),
          envelope('A1', 'a', 1),
          envelope('C1', 'c', 1),
          envelope('P1', 'poison', 1),
          envelope('A3', 'a', 3),
          envelope('A1', 'a', 1),
          envelope('A1', 'a', 1, { delta: 99 }),
        ];
        for (const e of sent) await env.publish(e);
        await env.publishRaw('order.AmountAdded', Buffer.from('not json'));
        const messages: amqp.GetMessage[] = [];
        await waitFor(async () => {
          const message = await env.channel.get(env.queue, { noAck: false });
          if (message) messages.push(message);
          return messages.length === sent.length + 1;
        }, 'all eight deliveries');
        const settlements = await processor.processBatch(messages);
        for (const message of messages) env.channel.ack(message);
        const summary = settlements.map((s) => (s.action === 'retry' ? `retry:${s.reason}` : s.outcome === 'quarantined' ? `quarantined:${s.reason}` : s.outcome));
        assert.deepEqual(summary, [
          'applied',
          'applied',
          'applied',
          'retry:handler-error',
          'applied',
          'duplicate',
          'quarantined:content-conflict',
          'quarantined:malformed-body',
        ]);
        const applied = await env.db.pool.query<{ event_id: string }>(`SELECT event_id FROM "${env.schema}".applied ORDER BY seq`);
        assert.deepEqual(applied.rows.map((r) => r.event_id).filter((id) => id.startsWith('A')), ['A1', 'A2', 'A3'], 'A1, A2, A3 applied in version order');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'P1'`), 0, 'the failing event left no inbox row');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 4);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 4, 'each applied exactly once despite the batch being re-run one by one');
      } finally {
        await processor.close();
      }
    });
  });

  test('a batch handler gets each batch’s new events at once and set-based versioning keeps per-aggregate order', async () => {
    await withEnv(async (env) => {
      const batches: number[] = [];
      const consumer = env.start({
        batchHandler: async (events, { tx }) => {
          batches.push(events.length);
          await applyIncrements(tx, { projection: PROJECTION, events, schema: env.schema }, async (applicable) => {
            for (const event of applicable) {
              await tx.query(`INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, $3)`, [event.eventId, event.aggregateId, event.aggregateVersion]);
            }
          });
        },
        batchSize: 50,
      });
      await consumer.ready();
      for (let version = 1; version <= 20; version++) {
        for (const id of ['x', 'y', 'z']) await env.publish(envelope(`${id}${version}`, id, version));
      }
      await waitFor(async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied`)) === 60, 'all 60 events applied');
      const rows = await env.db.pool.query<{ aggregate_id: string; amount: number }>(`SELECT aggregate_id, amount FROM "${env.schema}".applied ORDER BY seq`);
      for (const id of ['x', 'y', 'z']) {
        assert.deepEqual(rows.rows.filter((r) => r.aggregate_id === id).map((r) => r.amount), Array.from({ length: 20 }, (_, i) => i + 1));
      }
      assert.equal(batches.reduce((a, b) => a + b, 0), 60);
      assert.ok(batches.every((size) => size <= 50));
    });
  });
});

describe('reorder buffer', () => {
  const parkedRows = (env: Env) =>
    env.pool.query<{ event_id: string; aggregate_version: string; waiting_for: string; projection: string }>(
      `SELECT event_id, aggregate_version, waiting_for, projection FROM "${env.schema}".parked ORDER BY aggregate_version`,
    );
  const appliedIds = async (env: Env) => (await env.pool.query<{ event_id: string }>(`SELECT event_id FROM "${env.schema}".applied ORDER BY seq`)).rows.map((r) => r.event_id);

  test('early events are parked durably and acked, and apply in order, each with its inbox row, once the missing version arrives', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      const settled = collect(consumer);
      const drained: Settlement[] = [];
      consumer.on('drained', (s) => drained.push(s));
      try {
        await consumer.ready();
        await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E3 and E2 parked');
        await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 0, 'both deliveries acked');
        assert.deepEqual(
          (await parkedRows(env)).rows.map((r) => [r.event_id, Number(r.aggregate_version), Number(r.waiting_for), r.projection]),
          [['E2', 2, 1, PROJECTION], ['E3', 3, 1, PROJECTION]],
        );
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'a parked event is not processed');
        const gaps = await readGaps(env.pool, { schema: env.schema, consumer: env.queue });
        assert.deepEqual(
          gaps.map((g) => [g.consumer, g.projection, g.aggregateId, g.currentVersion, g.missingVersion, g.parkedVersions]),
          [[env.queue, PROJECTION, 'o1', 0, 1, [2, 3]]],
        );
        assert.deepEqual(await readGaps(env.pool, { schema: env.schema, olderThanMs: 3_600_000 }), [], 'not open for an hour');
        assert.deepEqual(settled.map((s) => (s.action === 'ack' ? s.outcome : s.action)), ['parked', 'parked']);

        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 3, 'E1 applied and E2, E3 drained');
        assert.deepEqual(await appliedIds(env), ['E1', 'E2', 'E3']);
        assert.deepEqual(drained.map((s) => s.eventId), ['E2', 'E3']);
        assert.equal((await parkedRows(env)).rows.length, 0, 'drained events leave the buffer');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 3);
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 3);
        assert.deepEqual({ parked: consumer.stats.parked, drained: consumer.stats.drained, retried: consumer.stats.retried }, { parked: 2, drained: 2, retried: 0 });
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0, 'nothing went through the retry queue');
    });
  });

  test('a redelivered parked event is acked without a second row; the same eventId with other content is a conflict', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      const conflicts: ContentConflictError[] = [];
      consumer.on('conflict', (err) => conflicts.push(err));
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the conflicting copy to be quarantined');
        assert.equal(consumer.stats.parked, 2, 'both identical copies were acked as parked');
        assert.equal((await parkedRows(env)).rows.length, 1);
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'content-conflict');
        assert.equal(conflicts[0]?.eventId, 'E2');

        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 2, 'E1 and the parked E2 applied');
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 30, 'the parked content, not the conflicting one');
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('is bounded per aggregate: beyond the limit an early event waits in the retry queue instead', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, reorderBuffer: { maxPerAggregate: 1 }, handlers: { AmountAdded: applyOrder(env.schema) } });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2));
        await env.publish(envelope('E3', 'o1', 3));
        await env.publish(envelope('F2', 'o2', 2));
        await waitFor(() => settled.some((s) => s.action === 'retry' && s.eventId === 'E3'), 'E3 refused by the full buffer');
        assert.ok(settled.some((s) => s.action === 'retry' && s.eventId === 'E3' && s.reason === 'reorder-buffer-full'));
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E2 and F2 (another aggregate) parked');

        await env.publish(envelope('E1', 'o1', 1));
        await env.publish(envelope('F1', 'o2', 1));
        await waitFor(() => consumer.stats.applied === 5, 'all five applied, E3 after its trip through the retry queue');
        const ids = await appliedIds(env);
        assert.deepEqual(ids.filter((id) => id.startsWith('E')), ['E1', 'E2', 'E3']);
        assert.deepEqual(ids.filter((id) => id.startsWith('F')), ['F1', 'F2']);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a total limit caps the buffer across aggregates', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, reorderBuffer: { maxTotal: 1 }, handlers: { AmountAdded: applyOrder(env.schema) } });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2));
        await env.publish(envelope('F2', 'o2', 2));
        await waitFor(() => settled.some((s) => s.action === 'retry' && s.eventId === 'F2' && s.reason === 'reorder-buffer-full'), 'F2 refused');
        assert.equal((await parkedRows(env)).rows.length, 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('an event parked just after its predecessor committed (and drained nothing) drains itself', async () => {
    await withEnv(async (env) => {
      let holdE2 = true;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let gapSeen!: () => void;
      const gap = new Promise<void>((resolve) => (gapSeen = resolve));
      const handler: EventHandler = async (event, context) => {
        try {
          await applyOrder(env.schema)(event, context);
        } catch (err) {
          // E2 saw the gap; hold its rollback until E1 has committed and run its own drain check.
          if (event.eventId === 'E2' && holdE2) {
            holdE2 = false;
            gapSeen();
            await released;
          }
          throw err;
        }
      };
      const options = { consumer: 'race', pool: env.pool, schema: env.schema, logger: silentLogger, handlers: { AmountAdded: handler } };
      const first = new DeliveryProcessor(options);
      const second = new DeliveryProcessor(options);
      const delivery = (e: EventEnvelope) => ({ content: encodeMessage(e, routingKey).content, fields: { exchange: env.exchange, routingKey: 'order.AmountAdded' }, properties: { messageId: e.eventId, headers: {} } });
      try {
        const e2 = first.process(delivery(envelope('E2', 'o1', 2)));
        await gap;
        const e1 = envelope('E1', 'o1', 1);
        assert.deepEqual(await second.process(delivery(e1)), { action: 'ack', outcome: 'applied', eventId: 'E1', occurredAt: e1.occurredAt });
        release();
        assert.deepEqual(await e2, { action: 'ack', outcome: 'parked', eventId: 'E2' });
        assert.deepEqual(await appliedIds(env), ['E1', 'E2'], 'E2 was drained by the parking side');
        assert.equal((await parkedRows(env)).rows.length, 0);
      } finally {
        await first.close();
        await second.close();
      }
    });
  });

  test('repairGaps closes a gap from the source: baseline set, parked events above it drain, covered ones and late copies are done without effect', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        // E2 is lost on the way; E3 and E4 arrive and wait.
        await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
        await env.publish(envelope('E4', 'o1', 4, { delta: 40 }));
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E3 and E4 parked');
        assert.equal(consumer.stats.applied, 1);

        const unknown = await repairGaps(consumer, { loadSnapshot: async () => null, apply: async () => assert.fail('nothing to write') });
        assert.deepEqual(unknown, { gaps: 1, repaired: 0, notNewer: 0, unknownAtSource: 1, drained: 0 });
        assert.equal((await parkedRows(env)).rows.length, 2, 'absence at the source changes nothing');

        // The source is at version 3 with a total of 60 (E1 + E2 + E3).
        const report = await repairGaps(consumer, {
          loadSnapshot: async (gap) => (gap.aggregateId === 'o1' ? { version: 3, amount: 60 } : null),
          apply: async (tx, snapshot, gap) => {
            await tx.query(`DELETE FROM "${env.schema}".applied WHERE aggregate_id = $1`, [gap.aggregateId]);
            await tx.query(`INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ('snapshot@3', $1, $2)`, [gap.aggregateId, snapshot.amount]);
          },
        });
        assert.deepEqual(report, { gaps: 1, repaired: 1, notNewer: 0, unknownAtSource: 0, drained: 2 });
        assert.deepEqual(await appliedIds(env), ['snapshot@3', 'E4'], 'E3 was covered by the snapshot, E4 applied on top');
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 100);
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 4);
        assert.equal(await env.count(`SELECT baseline_version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 3);
        assert.equal((await parkedRows(env)).rows.length, 0);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id IN ('E3', 'E4')`), 2, 'both recorded as done');

        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await waitFor(async () => (await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E2'`)) === 1, 'the late E2 recorded');
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 100, 'the late E2 had no effect');
        assert.deepEqual(await repairGaps(consumer, { loadSnapshot: async () => assert.fail('no gap left'), apply: async () => undefined }), { gaps: 0, repaired: 0, notNewer: 0, unknownAtSource: 0, drained: 0 });
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('on subscribing, a consumer drains parked events that a repair made applicable while it was away', async () => {
    await withEnv(async (env) => {
      const first = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      await first.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
      await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
      await waitFor(async () => (await parkedRows(env)).rows.length === 1, 'E3 parked');
      await env.stop(first);
      // Somebody else closes the gap (a reconcile repair): the projection is now at 2.
      await env.pool.query(`UPDATE "${env.schema}".projection_state SET version = 2, baseline_version = 2 WHERE aggregate_id = 'o1'`);
      await env.pool.query(`INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ('repair@2', 'o1', 20)`);

      const second = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await second.ready();
        assert.equal(second.stats.drained, 1, 'drained before ready() resolved, with no new delivery');
        assert.deepEqual(await appliedIds(env), ['E1', 'repair@2', 'E3']);
        assert.equal((await parkedRows(env)).rows.length, 0);
      } finally {
        await env.stop(second);
      }
    });
  });

  test('rejects invalid limits with ConfigError naming the field', () => {
    assert.throws(
      () => new DeliveryProcessor({ consumer: 'c', handlers: { X: async () => undefined }, reorderBuffer: { maxPerAggregate: 0 } }),
      (err: unknown) => err instanceof ConfigError && err.field === 'reorderBuffer.maxPerAggregate',
    );
  });
});
