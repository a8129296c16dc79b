/**
 * A header table amqplib cannot decode (nested 4,000 deep: 28 KB, far under frame_max, and any
 * producer may publish it) must not take the consumer's connection down: the transport's guard
 * (src/transport/header-guard.ts) hands it over with its headers set aside, and the consumer
 * quarantines it as `undecodable-headers` while the events behind it apply. Published with the raw
 * client (test/support/raw-amqp.ts), since amqplib cannot read back what it would have to write.
 */
import assert from 'node:assert/strict';
import { RabbitMqTransport, type Transport } from '../../src/index.js';
import { decodeProperties } from '../../src/inbox/stored-properties.js';
import {
  applyOrder,
  envelope,
  quarantineRows,
  withEnv,
  type Env,
  type QuarantineRow,
} from '../support/consumer-env.js';
import { RawAmqpRefused, encodeTable, nestedTable, publishRaw } from '../support/raw-amqp.js';
import { AMQP_URL, describe, test, waitFor } from '../support/rig.js';

const DEEP = nestedTable(4_000);
const VALID = 20;

/** RabbitMQ's transport, counting the connections the consumer opens: one per session. */
function countingTransport(): Transport & { connects: number } {
  const transport = new RabbitMqTransport({ urls: AMQP_URL });
  const counting = {
    kind: transport.kind,
    connects: 0,
    failure: (err: unknown) => transport.failure(err),
    connect: (request: Parameters<Transport['connect']>[0]) => {
      counting.connects++;
      return transport.connect(request);
    },
  };
  return counting;
}

async function publishDeep(queue: string, messageId: string, expiration?: string): Promise<void> {
  const sent = await publishRaw({
    url: AMQP_URL,
    exchange: '',
    routingKey: queue,
    headersBytes: DEEP,
    properties: { messageId, type: 'AmountAdded', contentType: 'application/json', deliveryMode: 2, expiration },
    body: Buffer.from(JSON.stringify(envelope(messageId, 'other', 1))),
  });
  assert.deepEqual(sent, { outcome: 'acked' });
}

async function publishValid(env: Env): Promise<void> {
  for (let version = 1; version <= VALID; version++) await env.publish(envelope(`E${version}`, 'o1', version));
}

async function storedProperties(env: Env, row: QuarantineRow): Promise<Record<string, unknown>> {
  const { rows } = await env.pool.query<{ properties_exact: string | null }>(
    `SELECT properties_exact FROM "${env.schema}".quarantine WHERE id = $1`,
    [row.id],
  );
  return decodeProperties(rows[0]!.properties_exact, row.properties);
}

/** The row keeps the table's bytes (base64) beside the properties that could be read. */
async function assertKeptForAPerson(
  env: Env,
  row: QuarantineRow,
  messageId: string,
  eventId: string | null = null,
): Promise<void> {
  // The consumer names it by nothing it carries; the dead-letter intake by its messageId, as every dead message.
  assert.equal(row.event_id, eventId);
  assert.equal(row.failure_class, 'permanent');
  const stored = await storedProperties(env, row);
  assert.equal(stored.messageId, messageId);
  assert.deepEqual(stored.headers, {});
  const undecodable = stored.undecodableHeaders as { bound: string; raw: string };
  assert.equal(undecodable.bound, 'depth');
  const raw = Buffer.from(undecodable.raw, 'base64');
  // A dead-lettered copy arrives with the broker's x-death entries added to the sent table.
  assert.ok(eventId === null ? raw.equals(DEEP) : raw.includes(DEEP), 'the header bytes are kept as they arrived');
}

const appliedCount = (env: Env) => env.count('SELECT count(*) AS n FROM $schema.applied');

describe('hostile AMQP header tables', () => {
  test('classic queue: a 4,000-level table is quarantined, the 20 events behind it apply, no reconnect', async () => {
    await withEnv(async (env) => {
      const handlers = { AmountAdded: applyOrder(env.schema) };
      const declaring = env.start({ handlers });
      await declaring.ready();
      await env.stop(declaring);
      await publishDeep(env.queue, 'M-deep');
      await publishValid(env);

      const transport = countingTransport();
      const consumer = env.start({ handlers, transport });
      await waitFor(async () => (await appliedCount(env)) === VALID, `the ${VALID} events behind it to apply`);
      const [row] = await quarantineRows(env);
      assert.equal(row?.reason, 'undecodable-headers');
      assert.equal(row.detail, 'header table nested deeper than 64 levels');
      await assertKeptForAPerson(env, row, 'M-deep');
      assert.equal(transport.connects, 1, 'the connection survived the delivery');
      assert.equal(consumer.stats.quarantined, 1);
      await env.stop(consumer);
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked, not left to come back');
    });
  });

  test('quorum queue: quarantined from the queue, and from the dead queue when the broker dead-lettered it', async () => {
    await withEnv(async (env) => {
      const options = {
        queueType: 'quorum',
        deliveryLimit: 2,
        handlers: { AmountAdded: applyOrder(env.schema) },
      } as const;
      const deadQueue = `${env.queue}.dead`;
      const declaring = env.start(options);
      await declaring.ready();
      await env.stop(declaring);
      // Expired at once: the broker dead-letters it into <queue>.dead, adding x-death to the same table.
      await publishDeep(env.queue, 'M-expired', '1');
      await waitFor(async () => (await env.checkQueue(deadQueue)).messageCount === 1, 'the broker to dead-letter it');
      await publishDeep(env.queue, 'M-deep');
      await publishValid(env);

      const transport = countingTransport();
      const consumer = env.start({ ...options, transport });
      await waitFor(async () => (await appliedCount(env)) === VALID, `the ${VALID} events behind it to apply`);
      const rows = await waitFor(async () => {
        const found = await quarantineRows(env);
        return found.length === 2 && found;
      }, 'both messages in quarantine');
      const byId = new Map(rows.map((r) => [r.properties.messageId, r]));
      const dead = byId.get('M-expired')!;
      const live = byId.get('M-deep')!;
      assert.equal(dead.reason, 'undecodable-headers');
      assert.equal(dead.detail, `found in ${deadQueue}: header table nested deeper than 64 levels`);
      assert.equal(live.reason, 'undecodable-headers');
      assert.equal(live.detail, 'header table nested deeper than 64 levels');
      await assertKeptForAPerson(env, dead, 'M-expired', 'M-expired');
      await assertKeptForAPerson(env, live, 'M-deep');
      assert.equal(transport.connects, 1, 'neither intake took the session down');
      await waitFor(async () => (await env.checkQueue(deadQueue)).messageCount === 0, 'the dead message acked');
      await env.stop(consumer);
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
    });
  });

  test('RabbitMQ refuses a malformed table at publish (541), so none reaches a consumer', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      await consumer.ready();
      const key = Buffer.from([1, 0x6b]);
      const malformed = {
        'unknown field type': Buffer.concat([key, Buffer.from('Z'), Buffer.from([0, 0, 0, 1])]),
        'truncated string': Buffer.concat([key, Buffer.from('S'), Buffer.from([0, 0, 0, 50, 0x61])]),
        'nested length past its container': Buffer.concat([
          key,
          Buffer.from('F'),
          Buffer.from([0, 0, 1, 0]),
          encodeTable({ a: 1 }),
        ]),
      };
      for (const [name, headersBytes] of Object.entries(malformed)) {
        const refused = await publishRaw({
          url: AMQP_URL,
          exchange: '',
          routingKey: env.queue,
          headersBytes,
          properties: { messageId: name },
          body: Buffer.from('{}'),
        }).catch((err: unknown) => err);
        assert.ok(refused instanceof RawAmqpRefused, name);
        assert.equal(refused.replyCode, 541, name);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
      assert.deepEqual(consumer.stats.quarantined, 0);
    });
  });
});
