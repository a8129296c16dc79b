/**
 * Headers amqplib decodes into values its own encoder refuses or changes (issue 26 e), and a
 * `__proto__` key that would replace a decoded table's prototype (issue 26 f), sent as raw frames
 * (test/support/raw-amqp.ts) through the paths where converge publishes a delivery again: the retry
 * copy and `dlq replay`. Each message must end in exactly one outcome with its headers as they
 * were, or the ones that cannot be carried named in `x-converge-headers-omitted`.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { replayQuarantined } from '../../src/ops/index.js';
import { decodeProperties } from '../../src/inbox/stored-properties.js';
import { HEADERS_OMITTED_HEADER } from '../../src/transport/header-encoding.js';
import {
  applyOrder,
  envelope,
  quarantineRows,
  withEnv,
  type Env,
  type QuarantineRow,
} from '../support/consumer-env.js';
import { encodeTable, publishRaw } from '../support/raw-amqp.js';
import { AMQP_URL, describe, test, uniqueName, waitFor } from '../support/rig.js';

const require = createRequire(import.meta.url);
const codec = require(path.join(path.dirname(require.resolve('amqplib')), 'lib/codec.js')) as {
  decodeFields(bytes: Buffer): Record<string, unknown>;
};

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const f64 = (n: number) => {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(n);
  return b;
};
const i64 = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};
/** One header `k` of wire type `tag`, as header-table content. */
const field = (tag: string, value: Buffer, key = 'k') =>
  Buffer.concat([Buffer.from([Buffer.byteLength(key)]), Buffer.from(key), Buffer.from(tag), value]);
const container = (tag: string, content: Buffer, key = 'k') =>
  field(tag, Buffer.concat([u32(content.length), content]), key);

/**
 * Each kind beside a plain header, so a copy that dropped everything would show. NaN and
 * ±Infinity are not among them: RabbitMQ refuses them at publish (541, the connection closed),
 * so none reaches a consumer (test/unit/header-encoding.test.ts covers them).
 */
const KINDS: Record<string, Buffer> = {
  'double -0': field('d', f64(-0)),
  'double 2^50 + 0.5': field('d', f64(2 ** 50 + 0.5)),
  'float 1.5': field('f', Buffer.from([0x3f, 0xc0, 0, 0])),
  'int64 2^63 - 1': field('l', i64(2n ** 63n - 1n)),
  timestamp: field('T', i64(1_700_000_000n)),
  'timestamp near 2^64': field('T', Buffer.from('fffffffffffffff0', 'hex')),
  decimal: field('D', Buffer.concat([Buffer.from([2]), u32(12345)])),
  'unsigned byte': field('B', Buffer.from([200])),
  'unsigned short': field('u', Buffer.from([0xff, 0xff])),
  'unsigned int': field('i', u32(2 ** 32 - 1)),
  bytes: container('x', Buffer.from([0, 0xff, 0x80])),
  void: field('V', Buffer.alloc(0)),
  'array of those': container(
    'A',
    Buffer.concat([Buffer.from('d'), f64(-0), Buffer.from('T'), i64(5n), Buffer.from('x'), u32(1), Buffer.from([7])]),
  ),
  'table with a ! key': container('F', encodeTable({ '!': 'nonsense', value: 1 })),
  // A 200-byte key of invalid UTF-8: amqplib decodes it to 600 bytes of U+FFFD, over a key's 255.
  'key widened past 255 bytes': Buffer.concat([
    Buffer.from([200]),
    Buffer.alloc(200, 0xff),
    Buffer.from('S'),
    u32(1),
    Buffer.from('v'),
  ]),
};
const CARRIED_AS_IS = encodeTable({ plain: 'kept' });
const OMITTED = new Set(['timestamp near 2^64', 'table with a ! key', 'key widened past 255 bytes']);

async function declareQueue(env: Env): Promise<void> {
  const declaring = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
  await declaring.ready();
  await env.stop(declaring);
}

async function publishKind(queue: string, messageId: string, headersBytes: Buffer, version = 1): Promise<void> {
  const sent = await publishRaw({
    url: AMQP_URL,
    exchange: '',
    routingKey: queue,
    headersBytes,
    properties: { messageId, type: 'AmountAdded', contentType: 'application/json', deliveryMode: 2 },
    body: Buffer.from(JSON.stringify(envelope(messageId, `agg-${messageId}`, version))),
  });
  assert.deepEqual(sent, { outcome: 'acked' });
}

async function storedHeaders(env: Env, row: QuarantineRow): Promise<Record<string, unknown>> {
  const { rows } = await env.pool.query<{ properties_exact: string | null }>(
    `SELECT properties_exact FROM "${env.schema}".quarantine WHERE id = $1`,
    [row.id],
  );
  return decodeProperties(rows[0]!.properties_exact, row.properties).headers ?? {};
}

const failing = () => Promise.reject(new Error('handler failed on purpose'));

describe('headers converge publishes again', () => {
  test('a retry copy carries every header kind as it was, or names the ones it cannot carry', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      const names = Object.keys(KINDS);
      for (const [i, name] of names.entries())
        await publishKind(env.queue, `K${i}`, Buffer.concat([KINDS[name]!, CARRIED_AS_IS]));
      const consumer = env.start({ handlers: { AmountAdded: failing }, maxAttempts: 2 });
      // Today's code threw on the copy's publish (or changed it): no row, the delivery back after the backoff, for ever.
      const rows = await waitFor(
        async () => {
          const found = await quarantineRows(env);
          return found.length === names.length && found;
        },
        `the ${names.length} messages quarantined after their second attempt`,
        30_000,
      );
      await env.stop(consumer);
      for (const row of rows) {
        const name = names[Number(row.properties.messageId!.slice(1))]!;
        assert.equal(row.reason, 'handler-failed', name);
        assert.equal(row.attempts, 2, `${name}: tried twice, via one retry copy`);
        const original = codec.decodeFields(Buffer.concat([KINDS[name]!, CARRIED_AS_IS]));
        const stored = await storedHeaders(env, row);
        // Without converge's per-trip headers and the broker's (x-death from the retry tier).
        const fromSender = Object.fromEntries(Object.entries(stored).filter(([key]) => !key.startsWith('x-')));
        if (OMITTED.has(name)) {
          const [key] = Object.keys(original);
          assert.deepEqual(fromSender, { plain: 'kept' }, name);
          assert.equal((stored[HEADERS_OMITTED_HEADER] as string[]).length, 1, name);
          assert.ok(key!.startsWith((stored[HEADERS_OMITTED_HEADER] as string[])[0]!.replace(/…$/, '')), name);
        } else {
          assert.deepEqual(fromSender, original, name);
          assert.equal(stored[HEADERS_OMITTED_HEADER], undefined, name);
        }
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
    });
  });

  test('a __proto__ key (bytes, or a table forging x-converge-attempt) ends in one quarantine row, never the handler', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      const proto = (value: Buffer) => Buffer.concat([Buffer.from([9]), Buffer.from('__proto__'), value]);
      const forged = encodeTable({ 'x-converge-attempt': 99 });
      const cases = {
        'P-bytes': proto(Buffer.concat([Buffer.from('x'), u32(2), Buffer.from([1, 2])])),
        'P-table': proto(Buffer.concat([Buffer.from('F'), u32(forged.length), forged])),
        'P-nested': container('F', proto(Buffer.concat([Buffer.from('F'), u32(forged.length), forged])), 'n'),
      };
      for (const [id, bytes] of Object.entries(cases)) await publishKind(env.queue, id, bytes);
      let calls = 0;
      const consumer = env.start({
        handlers: { AmountAdded: () => (calls++, failing()) },
        maxAttempts: 3,
      });
      const rows = await waitFor(async () => {
        const found = await quarantineRows(env);
        return found.length === 3 && found;
      }, 'the three messages quarantined');
      await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 0, 'the queue drained');
      await env.stop(consumer);
      assert.equal(calls, 0, 'no handler ran on headers converge cannot trust');
      for (const row of rows) {
        assert.equal(row.reason, 'undecodable-headers', row.properties.messageId);
        assert.match(row.detail, /header table key __proto__ at byte \d+/);
        assert.equal(row.times_seen, 1);
        assert.equal(row.attempts, 1, 'the forged attempt count was not read');
      }
      assert.equal((await quarantineRows(env)).length, 3, 'one row each, no loop');
    });
  });

  test('dlq replay publishes bytes and -0 as they were sent and reports the header it omitted', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      const headersBytes = Buffer.concat([
        container('x', Buffer.from([0, 0xff])),
        field('d', f64(-0), 'negativeZero'),
        container('F', encodeTable({ '!': 'nonsense', value: 1 }), 'bang'),
      ]);
      await publishKind(env.queue, 'R1', headersBytes);
      const consumer = env.start({ handlers: { AmountAdded: failing }, maxAttempts: 1 });
      const [row] = await waitFor(async () => {
        const found = await quarantineRows(env);
        return found.length === 1 && found;
      }, 'the message quarantined');
      await env.stop(consumer);
      const target = uniqueName('cvc.replay');
      env.extraQueues.push(target);
      await env.channel.assertQueue(target, { durable: false });
      const receipt = await replayQuarantined(env.pool, env.publisher, {
        id: row!.id,
        queue: target,
        schema: env.schema,
      });
      assert.deepEqual(receipt, { queue: target, omittedHeaders: ['bang'], omittedProperties: [] });
      const message = await waitFor(() => env.channel.get(target, { noAck: true }), 'the replayed copy');
      const headers = message.properties.headers as Record<string, unknown>;
      assert.deepEqual(headers.k, Buffer.from([0, 0xff]));
      assert.ok(Object.is(headers.negativeZero, -0));
      assert.equal(headers.bang, undefined);
      assert.deepEqual(headers[HEADERS_OMITTED_HEADER], ['bang']);
      assert.equal(headers['x-converge-replay-of'], row!.id);
    });
  });
});
