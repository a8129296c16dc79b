/**
 * Baselines with none of converge's guarantees: what the broker and the database do on
 * their own on this machine, measured in the same run as converge so ratios are fair.
 */
import type amqp from 'amqplib';
import type pg from 'pg';
import { body, openBroker, unique } from './env.js';
import { rate } from './stats.js';

async function withQueue<T>(connection: amqp.ChannelModel, work: (exchange: string, queue: string) => Promise<T>): Promise<T> {
  const channel = await connection.createChannel();
  const exchange = unique('bench.raw');
  const queue = unique('bench.raw.q');
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true });
  await channel.bindQueue(queue, exchange, '#');
  try {
    return await work(exchange, queue);
  } finally {
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.deleteExchange(exchange).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
}

/** Persistent, mandatory publishes with a window of unconfirmed messages. */
export async function publishWindowed(channel: amqp.ConfirmChannel, exchange: string, count: number, window = 1000): Promise<void> {
  let inFlight = 0;
  let confirmed = 0;
  let wake: (() => void) | undefined;
  for (let i = 0; i < count; i++) {
    while (inFlight >= window) await new Promise<void>((resolve) => (wake = resolve));
    inFlight++;
    channel.publish(exchange, 'raw.event', body(i), { persistent: true, mandatory: true, messageId: String(i), contentType: 'application/json' }, (err: unknown) => {
      if (err) throw new Error('raw publish nacked');
      inFlight--;
      confirmed++;
      wake?.();
    });
  }
  while (confirmed < count) await new Promise<void>((resolve) => (wake = resolve));
}

export async function rawPublishRate(count: number): Promise<number> {
  const connection = await openBroker();
  try {
    return await withQueue(connection, async (exchange) => {
      const channel = await connection.createConfirmChannel();
      const started = performance.now();
      await publishWindowed(channel, exchange, count);
      const elapsed = performance.now() - started;
      await channel.close();
      return rate(count, elapsed);
    });
  } finally {
    await connection.close();
  }
}

/** Consumes a pre-filled queue with prefetch and one ack-multiple per 100 deliveries. */
export async function rawConsumeRate(count: number, prefetch = 1000): Promise<number> {
  const connection = await openBroker();
  try {
    return await withQueue(connection, async (exchange, queue) => {
      const publisher = await connection.createConfirmChannel();
      await publishWindowed(publisher, exchange, count);
      await publisher.close();
      const channel = await connection.createChannel();
      await channel.prefetch(prefetch);
      let received = 0;
      const started = performance.now();
      await new Promise<void>((resolve) => {
        void channel.consume(queue, (message) => {
          if (!message) return;
          received++;
          if (received % 100 === 0 || received === count) channel.ack(message, true);
          if (received === count) resolve();
        });
      });
      const elapsed = performance.now() - started;
      await channel.close();
      return rate(count, elapsed);
    });
  } finally {
    await connection.close();
  }
}

/** Single-row transactions on one connection: the price of one commit. */
export async function rawSingleCommitRate(pool: pg.Pool, count: number): Promise<number> {
  const table = unique('bench_raw_commit');
  await pool.query(`CREATE TABLE public.${table} (id bigserial PRIMARY KEY, payload jsonb)`);
  const client = await pool.connect();
  try {
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      await client.query('BEGIN');
      await client.query(`INSERT INTO public.${table} (payload) VALUES ($1)`, [JSON.stringify({ i })]);
      await client.query('COMMIT');
    }
    return rate(count, performance.now() - started);
  } finally {
    client.release();
    await pool.query(`DROP TABLE public.${table}`);
  }
}
