/**
 * Basic properties amqplib decodes into values its own encoder refuses (issue 26, defect g): a
 * `timestamp` of 2^64 - 1 (read as 2^64) and short strings of 255 bytes of invalid UTF-8 (read as
 * 765 bytes of U+FFFD), sent as raw frames (test/support/raw-amqp.ts) through the retry copy and
 * `dlq replay`. Each message must go through its retries with its attempts counted (the copy's
 * signed headers verified against the messageId it carries) and end in one outcome, the properties
 * that could not be carried named in `x-converge-properties-omitted`. And should amqplib still
 * refuse a retry copy, the delivery is quarantined (`unencodable-copy`) instead of coming back for ever.
 */
import assert from 'node:assert/strict';
import { verifyConvergeHeaders } from '../../src/inbox/headers.js';
import { replayQuarantined } from '../../src/ops/index.js';
import { PublishError } from '../../src/runtime/errors.js';
import { PROPERTIES_OMITTED_HEADER, carriedMessageId } from '../../src/transport/property-encoding.js';
import { RabbitMqTransport, type Transport } from '../../src/index.js';
import { applyOrder, envelope, quarantineRows, withEnv, type Env } from '../support/consumer-env.js';
import { publishRaw, type RawProperties } from '../support/raw-amqp.js';
import { event, withRig } from '../support/relay-rig.js';
import { AMQP_URL, describe, test, uniqueName, waitFor } from '../support/rig.js';

const invalidUtf8 = Buffer.alloc(255, 0xff);
const decodedInvalid = invalidUtf8.toString('utf8'); // as amqplib reads it: 765 bytes

/** One hostile property per message, each beside properties that must arrive as they were sent. */
const KINDS: Record<string, RawProperties> = {
  'timestamp 2^64 - 1': { timestamp: 2n ** 64n - 1n },
  'messageId of 255 invalid UTF-8 bytes': { messageId: invalidUtf8 },
  'type of 255 invalid UTF-8 bytes': { type: invalidUtf8 },
  'correlationId of 255 invalid UTF-8 bytes': { correlationId: invalidUtf8 },
  'replyTo of 255 invalid UTF-8 bytes': { replyTo: invalidUtf8 },
  'contentType of 255 invalid UTF-8 bytes': { contentType: invalidUtf8 },
  'contentEncoding of 255 invalid UTF-8 bytes': { contentEncoding: invalidUtf8 },
  'appId of 255 invalid UTF-8 bytes': { appId: invalidUtf8 },
  'nothing refused': {},
};
// A property every copy carries as it came (userId is never carried: see foreign-user-id.test.ts).
const CARRIED = { priority: 7 };

async function declareQueue(env: Env): Promise<void> {
  const declaring = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
  await declaring.ready();
  await env.stop(declaring);
}

async function publishKind(queue: string, eventId: string, properties: RawProperties): Promise<void> {
  const sent = await publishRaw({
    url: AMQP_URL,
    exchange: '',
    routingKey: queue,
    properties: { messageId: eventId, deliveryMode: 2, ...CARRIED, ...properties },
    body: Buffer.from(JSON.stringify(envelope(eventId, `agg-${eventId}`, 1))),
  });
  assert.deepEqual(sent, { outcome: 'acked' });
}

/** The stored properties of each quarantine row, by the eventId of its body. */
async function storedProperties(env: Env): Promise<Map<string, Record<string, unknown>>> {
  const { rows } = await env.pool.query<{ event_id: string; properties: Record<string, unknown> }>(
    `SELECT event_id, properties FROM "${env.schema}".quarantine`,
  );
  return new Map(rows.map((row) => [row.event_id, row.properties]));
}

async function headerKey(env: Env): Promise<Buffer> {
  const { rows } = await env.pool.query<{ key: Buffer }>(`SELECT key FROM "${env.schema}".header_key`);
  return rows[0]!.key;
}

const failing = () => Promise.reject(new Error('handler failed on purpose'));

/** RabbitMQ, but every retry copy the consumer publishes is refused as amqplib refuses what it cannot encode. */
function refusingCopies(): Transport {
  const transport = new RabbitMqTransport({ urls: AMQP_URL });
  return {
    kind: transport.kind,
    failure: (err) => transport.failure(err),
    connect: async (request) => {
      const connection = await transport.connect(request);
      return {
        openPublisher: async (options) => {
          const publisher = await connection.openPublisher(options);
          return {
            publish: () => Promise.reject(new PublishError('unencodable', 'amqplib could not encode the message')),
            get closed() {
              return publisher.closed;
            },
            holdTimeouts: () => publisher.holdTimeouts(),
            resumeTimeouts: () => publisher.resumeTimeouts(),
            close: () => publisher.close(),
            retire: () => publisher.retire(),
            carriedHeaders: (headers) => publisher.carriedHeaders(headers),
          };
        },
        declareQueues: (set) => connection.declareQueues(set),
        subscribe: (queue, onDelivery, options) => connection.subscribe(queue, onDelivery, options),
        inspectQueue: (queue) => connection.inspectQueue(queue),
        peekHead: (queue) => connection.peekHead(queue),
        checkExchangeType: (type, probeName) => connection.checkExchangeType(type, probeName),
        close: () => connection.close(),
      };
    },
  };
}

describe('properties converge publishes again', () => {
  test('a retry copy leaves out and names the properties amqplib cannot carry; attempts are counted to quarantine', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      const names = Object.keys(KINDS);
      for (const [i, name] of names.entries()) await publishKind(env.queue, `P${i}`, KINDS[name]!);
      const consumer = env.start({ handlers: { AmountAdded: failing }, maxAttempts: 3 });
      // Before the fix every copy failed as CONVERGE_PUBLISH_UNENCODABLE: back at attempt 1, for ever.
      const rows = await waitFor(
        async () => {
          const found = await quarantineRows(env);
          return found.length === names.length && found;
        },
        `the ${names.length} messages quarantined after their third attempt`,
        30_000,
      );
      await env.stop(consumer);
      const stored = await storedProperties(env);
      for (const row of rows) {
        const name = names[Number(row.event_id!.slice(1))]!;
        const [refused] = Object.keys(KINDS[name]!);
        assert.equal(row.reason, 'handler-failed', name);
        assert.equal(row.attempts, 3, `${name}: tried three times, via two signed retry copies`);
        const properties = stored.get(row.event_id!)!;
        assert.deepEqual([properties.priority, properties.deliveryMode], [7, 2], name);
        const headers = (properties.headers ?? {}) as Record<string, unknown>;
        if (refused === undefined) {
          assert.equal(headers[PROPERTIES_OMITTED_HEADER], undefined, name);
          assert.equal(properties.messageId, row.event_id);
          continue;
        }
        assert.deepEqual(headers[PROPERTIES_OMITTED_HEADER], [refused], name);
        if (refused === 'messageId') assert.equal(properties.messageId, carriedMessageId(decodedInvalid));
        else assert.equal(properties[refused], undefined, name);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
    });
  });

  test('dlq replay leaves out the timestamp, replaces the messageId, signs what it sends and reports both', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      await publishKind(env.queue, 'R1', { messageId: invalidUtf8, timestamp: 2n ** 64n - 1n });
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
      assert.deepEqual(receipt, { queue: target, omittedHeaders: [], omittedProperties: ['messageId', 'timestamp'] });
      const message = await waitFor(() => env.channel.get(target, { noAck: true }), 'the replayed copy');
      const { properties } = message;
      assert.equal(properties.messageId, carriedMessageId(decodedInvalid));
      assert.equal(properties.timestamp, undefined);
      assert.equal(properties.priority, 7);
      const headers = properties.headers as Record<string, unknown>;
      assert.deepEqual(headers[PROPERTIES_OMITTED_HEADER], ['messageId', 'timestamp']);
      const verdict = verifyConvergeHeaders(await headerKey(env), message);
      assert.deepEqual(verdict.untrusted, [], 'signed with the messageId the copy carries');
      assert.equal(verdict.trusted.replayOf, row!.id);
    });
  });

  test('a retry copy amqplib still refuses quarantines the delivery (unencodable-copy) instead of requeueing it', async () => {
    await withEnv(async (env) => {
      await declareQueue(env);
      await publishKind(env.queue, 'U1', {});
      let calls = 0;
      const consumer = env.start({
        handlers: { AmountAdded: () => (calls++, failing()) },
        maxAttempts: 3,
        transport: refusingCopies(),
      });
      const [row] = await waitFor(async () => {
        const found = await quarantineRows(env);
        return found.length === 1 && found;
      }, 'the message quarantined');
      await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 0, 'the queue drained');
      assert.equal(consumer.stats.quarantined, 1);
      await env.stop(consumer);
      assert.equal(row!.reason, 'unencodable-copy');
      assert.equal(row!.failure_class, 'permanent');
      assert.equal(row!.attempts, 1);
      assert.match(row!.detail, /^attempt 1 \(handler-error\) could not be retried: publish unencodable: /);
      assert.equal(calls, 1, 'not requeued: the handler ran once');
    });
  });

  test('the relay publishes an event whose eventId is over 255 UTF-8 bytes with a sha256 messageId, not as unencodable', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('order.#');
      const eventId = '€'.repeat(200); // valid (200 characters), 600 bytes
      await rig.append(event('o-1', 1, { eventId }));
      rig.started();
      await waitFor(async () => (await rig.row(eventId)).status === 'published', 'the row published');
      const [message] = await waitFor(async () => {
        const got = await rig.drain(queue);
        return got.length === 1 && got;
      }, 'the message');
      assert.equal(message!.properties.messageId, carriedMessageId(eventId));
      assert.deepEqual((message!.properties.headers ?? {})[PROPERTIES_OMITTED_HEADER], ['messageId']);
      assert.equal((JSON.parse(message!.content.toString()) as { eventId: string }).eventId, eventId);
    });
  });
});
