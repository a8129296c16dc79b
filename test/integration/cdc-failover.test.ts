// test-files: heavy, starts a PostgreSQL 18 primary and a streaming standby of its own (kit/pg-pair.ts)
/**
 * The CDC relay across a PostgreSQL failover (PostgreSQL 17+ failover slots): its slot is created
 * with failover = true, the standby synchronises it (sync_replication_slots), the primary crashes and
 * the standby is promoted; the relay, given both servers as a host list, streams from the same slot
 * on the new primary. Every event whose COMMIT returned reaches the broker (a duplicate is allowed,
 * a loss is not) and is marked published there.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import pg from 'pg';
import { CdcRelay, createConverge, silentLogger } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { PgPair } from '../../kit/pg-pair.js';
import { appendUntilCommitted, FAST_BACKOFF } from '../support/failover.js';
import { AMQP_URL, connectRabbit, dropTestBroker, test, uniqueName, waitFor } from '../support/rig.js';

const FAST = FAST_BACKOFF;

async function slotOnStandby(url: string, slot: string): Promise<{ synced: boolean; temporary: boolean } | undefined> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ synced: boolean; temporary: boolean }>(
      'SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1',
      [slot],
    );
    return rows[0];
  } finally {
    await client.end().catch(() => undefined);
  }
}

test('a failover slot keeps the CDC relay going on the promoted standby: every committed event reaches the broker and is marked', async () => {
  const pair = await PgPair.start({ synchronous: true, signals: false });
  const connection = await connectRabbit();
  const exchange = uniqueName('cvt_cdcfail.events');
  const queue = uniqueName('cvt_cdcfail.q');
  const schema = uniqueName('cvt_cdcfail');
  const slot = uniqueName('cvt_cdcfail_slot');
  const url = pair.multiHostUrl;
  const converge = createConverge({ connectionString: url, amqpUrl: AMQP_URL, schema, exchange });
  let relay: CdcRelay | undefined;
  try {
    await pair.waitStreaming();
    await converge.migrate();
    const channel: amqp.Channel = await connection.createChannel();
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: false });
    await channel.bindQueue(queue, exchange, '#');
    const received = new Set<string>();
    await channel.consume(queue, (message) => message && received.add(String(message.properties.messageId)), {
      noAck: true,
    });

    const options = {
      connectionString: url,
      amqpUrl: AMQP_URL,
      schema,
      exchange,
      slot,
      publication: slot,
      logger: silentLogger,
      markIntervalMs: 20,
      standbyRetryMs: 50,
      backoff: FAST,
      reconnectBackoff: FAST,
    };
    assert.throws(
      () => new CdcRelay(options),
      (err: unknown) => err instanceof ConfigError && err.field === 'connectionString',
      'a host list without a failover slot is refused',
    );
    relay = new CdcRelay({ ...options, failoverSlot: true });
    relay.on('error', () => undefined);
    relay.start();
    await waitFor(() => relay!.state === 'active', 'the relay streaming from the primary', 30_000);

    const committed: string[] = [];
    for (let version = 1; version <= 5; version++)
      for (let a = 0; a < 8; a++) committed.push(await appendUntilCommitted(converge.pool, schema, `o${a}`, version));
    await waitFor(() => committed.every((id) => received.has(id)), 'the first 40 events at the broker', 30_000);
    // The standby keeps a synced slot for good only once the primary's has moved past where it began.
    await waitFor(
      async () => {
        const synced = await slotOnStandby(pair.standbyUrl, slot);
        return synced?.synced === true && !synced.temporary;
      },
      'the slot synchronised to the standby',
      30_000,
    );

    await pair.failPrimary('immediate');
    await pair.promoteStandby();
    for (let version = 6; version <= 10; version++)
      for (let a = 0; a < 8; a++) committed.push(await appendUntilCommitted(converge.pool, schema, `o${a}`, version));

    await waitFor(() => committed.every((id) => received.has(id)), 'all 80 committed events at the broker', 60_000);
    await waitFor(
      async () => {
        const { rows } = await converge.pool
          .query<{ pending: number }>(
            `SELECT count(*)::int AS pending FROM "${schema}".outbox WHERE status <> 'published'`,
          )
          .catch(() => ({ rows: [{ pending: -1 }] }));
        return rows[0]!.pending === 0;
      },
      'every outbox row marked published on the promoted standby',
      30_000,
    );
    const { rows } = await converge.pool.query<{ n: number; port: number }>(
      `SELECT count(*)::int AS n, inet_server_port() AS port FROM "${schema}".outbox`,
    );
    assert.deepEqual(rows[0], { n: 80, port: pair.ports.standby });
  } finally {
    await relay?.stop().catch(() => undefined);
    await converge.close().catch(() => undefined);
    await dropTestBroker(connection, [queue, exchange]).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await pair.stop();
  }
});
