/**
 * Baselines with none of converge's code or guarantees: what the broker and the database do
 * on their own on this machine, measured in the same run so the ratios compare like with like.
 */
import { randomUUID } from 'node:crypto';
import type amqp from 'amqplib';
import type pg from 'pg';
import type { EventEnvelope } from '../src/index.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../src/internal/index.js';
import { brokerNames, declareSink, withTimeout, type BenchContext } from './env.js';
import { eventAt } from './measure.js';
import { rate } from './stats.js';

export interface Outgoing {
  exchange: string;
  routingKey: string;
  content: Buffer;
  options: amqp.Options.Publish;
}

/** A ~200-byte JSON body, the size of a small event. */
export function rawBody(i: number): Buffer {
  return Buffer.from(JSON.stringify({ i, note: 'x'.repeat(170) }));
}

/**
 * Publishes `count` messages keeping at most `window` unconfirmed. A nack or a return fails
 * the whole call: a baseline that silently lost messages would flatter itself.
 */
export async function publishWindowed(
  channel: amqp.ConfirmChannel,
  count: number,
  message: (i: number) => Outgoing,
  window = 1000,
): Promise<void> {
  let inFlight = 0;
  let confirmed = 0;
  let failure: Error | undefined;
  let wake: () => void = () => undefined;
  const onReturn = () => (failure ??= new Error('broker returned a message as unroutable'));
  channel.on('return', onReturn);
  try {
    for (let i = 0; i < count; i++) {
      while (inFlight >= window && !failure) await new Promise<void>((resolve) => (wake = resolve));
      if (failure) throw failure;
      const out = message(i);
      inFlight++;
      channel.publish(
        out.exchange,
        out.routingKey,
        out.content,
        { ...out.options, persistent: true, mandatory: true },
        (err: unknown) => {
          if (err) failure ??= new Error('broker nacked a publish');
          inFlight--;
          confirmed++;
          wake();
        },
      );
    }
    while (confirmed < count && !failure) await new Promise<void>((resolve) => (wake = resolve));
    if (failure) throw failure;
  } finally {
    channel.off('return', onReturn);
  }
}

/** Confirm channel, window 1000, persistent + mandatory, to a topic exchange with one bound durable queue. */
export async function rawPublish(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const names = brokerNames(ctx, 'rawpub');
  try {
    await declareSink(ctx, names.exchange, names.queue);
    const channel = await ctx.broker.createConfirmChannel();
    try {
      const started = performance.now();
      await withTimeout(
        publishWindowed(channel, count, (i) => ({
          exchange: names.exchange,
          routingKey: 'raw.event',
          content: rawBody(i),
          options: { messageId: String(i), contentType: 'application/json' },
        })),
        timeoutMs,
        'raw_publish (RabbitMQ)',
      );
      return rate(count, performance.now() - started);
    } finally {
      await channel.close().catch(() => undefined);
    }
  } finally {
    await names.remove();
  }
}

/**
 * The same loop as raw_publish, but each message is exactly what converge's relay sends for a
 * bench event (encodeMessage: body, properties, headers, routing key): the ceiling a relay that
 * added nothing but reading and marking the outbox would reach.
 */
export async function rawPublishSameShape(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const names = brokerNames(ctx, 'rawshape');
  const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
  const occurredAt = new Date().toISOString();
  try {
    await declareSink(ctx, names.exchange, names.queue);
    const channel = await ctx.broker.createConfirmChannel();
    try {
      const started = performance.now();
      await withTimeout(
        publishWindowed(channel, count, (i) => {
          const message = encodeMessage(benchEnvelope(i, occurredAt), routingKey);
          return {
            exchange: names.exchange,
            routingKey: message.routingKey,
            content: message.content,
            options: message.options,
          };
        }),
        timeoutMs,
        'raw_publish_same_shape (RabbitMQ)',
      );
      return rate(count, performance.now() - started);
    } finally {
      await channel.close().catch(() => undefined);
    }
  } finally {
    await names.remove();
  }
}

/** The envelope of the i-th bench event, as the relay would build it from its outbox row. */
export function benchEnvelope(i: number, occurredAt: string): EventEnvelope {
  const { aggregateId, version } = eventAt(i);
  return {
    eventId: randomUUID(),
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'AmountAdded',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { delta: 1 },
    occurredAt,
  };
}

/** Consumes a pre-filled queue with prefetch 1000 and one ack-multiple per 100 deliveries. */
export async function rawConsume(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const names = brokerNames(ctx, 'rawcon');
  try {
    await declareSink(ctx, names.exchange, names.queue);
    const publisher = await ctx.broker.createConfirmChannel();
    await withTimeout(
      publishWindowed(publisher, count, (i) => ({
        exchange: names.exchange,
        routingKey: 'raw.event',
        content: rawBody(i),
        options: { messageId: String(i) },
      })),
      timeoutMs,
      'raw_consume: pre-filling the queue (RabbitMQ)',
    );
    await publisher.close();
    const channel = await ctx.broker.createChannel();
    try {
      await channel.prefetch(1000);
      let received = 0;
      const started = performance.now();
      const all = new Promise<void>((resolve) => {
        void channel.consume(names.queue, (message) => {
          if (!message) return;
          received++;
          if (received % 100 === 0 || received === count) channel.ack(message, true);
          if (received === count) resolve();
        });
      });
      await withTimeout(all, timeoutMs, `raw_consume (RabbitMQ): ${received}/${count} received`);
      return rate(count, performance.now() - started);
    } finally {
      await channel.close().catch(() => undefined);
    }
  } finally {
    await names.remove();
  }
}

async function rawTable(pool: pg.Pool, schema: string, name: string): Promise<string> {
  const table = `"${schema}".${name}`;
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.query(
    `CREATE TABLE ${table} (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, version bigint NOT NULL, payload jsonb NOT NULL)`,
  );
  return table;
}

/** One-row transactions on one connection: what one durable commit costs here. */
export async function rawPgSingleCommit(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const table = await rawTable(ctx.pool, ctx.schema, 'raw_single');
  const client = await ctx.pool.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${table} (aggregate_id, version, payload) VALUES ($1, $2, $3)`, [
        `a${i}`,
        1,
        '{"delta":1}',
      ]);
      await client.query('COMMIT');
      if (performance.now() > deadline)
        throw new Error(`raw_pg_single_commit (PostgreSQL): only ${i + 1}/${count} commits in ${timeoutMs / 1000} s`);
    }
    return rate(count, performance.now() - started);
  } finally {
    client.release();
    await ctx.pool.query(`DROP TABLE IF EXISTS ${table}`);
  }
}

/**
 * One statement's round trip to PostgreSQL (a prepared `SELECT $1`, one at a time on one connection):
 * microseconds. What query pipelining could save is at most this per statement it overlaps.
 */
export async function rawPgRoundTrip(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const client = await ctx.pool.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      await client.query({ name: 'bench_round_trip', text: 'SELECT $1::int AS i', values: [i] });
      if (performance.now() > deadline)
        throw new Error(`raw_pg_round_trip (PostgreSQL): only ${i + 1}/${count} round trips in ${timeoutMs / 1000} s`);
    }
    return ((performance.now() - started) * 1000) / count;
  } finally {
    client.release();
  }
}

/** Set-based inserts (unnest of 1,000-element arrays, one statement and commit each): rows/s. */
export async function rawPgBatchInsert(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  const table = await rawTable(ctx.pool, ctx.schema, 'raw_batch');
  const client = await ctx.pool.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    const started = performance.now();
    for (let from = 0; from < count; from += 1000) {
      const n = Math.min(1000, count - from);
      const ids = Array.from({ length: n }, (_, k) => `a${from + k}`);
      await client.query(
        `INSERT INTO ${table} (aggregate_id, version, payload) SELECT * FROM unnest($1::text[], $2::bigint[], $3::jsonb[])`,
        [ids, ids.map(() => 1), ids.map((_, k) => JSON.stringify({ delta: 1, i: from + k }))],
      );
      if (performance.now() > deadline)
        throw new Error(`raw_pg_batch_insert (PostgreSQL): only ${from + n}/${count} rows in ${timeoutMs / 1000} s`);
    }
    return rate(count, performance.now() - started);
  } finally {
    client.release();
    await ctx.pool.query(`DROP TABLE IF EXISTS ${table}`);
  }
}
