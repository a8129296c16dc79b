import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  PROPERTIES_OMITTED_HEADER,
  carriedMessageId,
  copyProperties,
  encodableProperties,
} from '../../src/transport/property-encoding.js';
import { encodeProperties as rawProperties, type RawProperties } from '../support/raw-amqp.js';

/**
 * amqplib's own property codec and publish arguments (not exported by the package, so loaded by
 * file): what ConfirmPublisher hands amqplib is Args.publish(options), which encodeProperties
 * writes or throws on; what a consumer of the copy reads is decode() of those bytes.
 */
const require = createRequire(import.meta.url);
const lib = path.join(path.dirname(require.resolve('amqplib')), 'lib');
const defs = require(path.join(lib, 'defs.js')) as {
  BasicProperties: number;
  encodeProperties(id: number, channel: number, size: number, fields: unknown): Buffer;
  decode(id: number, buffer: Buffer): Record<string, unknown>;
};
const args = require(path.join(lib, 'api_args.js')) as { publish(e: string, k: string, o: unknown): unknown };

/** The properties a consumer decodes from a content header with these raw properties. */
function received(properties: RawProperties): Record<string, unknown> {
  return defs.decode(defs.BasicProperties, rawProperties(properties));
}

/** What amqplib sends for publish options `options`, decoded as the next consumer sees it; throws as amqplib does. */
function republished(options: Record<string, unknown>): Record<string, unknown> {
  const frame = defs.encodeProperties(defs.BasicProperties, 1, 0, args.publish('', 'q', options));
  // Frame header (7), class and weight (4), body size (8); then flags and fields; the frame-end octet.
  return defs.decode(defs.BasicProperties, frame.subarray(19, frame.length - 1));
}

const invalidUtf8 = Buffer.alloc(255, 0xff); // 765 bytes once decoded: U+FFFD each

/** Raw properties amqplib decodes into values its own encoder refuses, by property. */
const refused: Record<string, RawProperties> = {
  'timestamp 2^64 - 1': { timestamp: 2n ** 64n - 1n },
  'timestamp 2^64 - 1024': { timestamp: 2n ** 64n - 1024n },
  'contentType of 255 invalid UTF-8 bytes': { contentType: invalidUtf8 },
  'contentEncoding of 255 invalid UTF-8 bytes': { contentEncoding: invalidUtf8 },
  'correlationId of 255 invalid UTF-8 bytes': { correlationId: invalidUtf8 },
  'replyTo of 255 invalid UTF-8 bytes': { replyTo: invalidUtf8 },
  'expiration of 255 invalid UTF-8 bytes': { expiration: invalidUtf8 },
  'type of 255 invalid UTF-8 bytes': { type: invalidUtf8 },
  'userId of 255 invalid UTF-8 bytes': { userId: invalidUtf8 },
  'appId of 255 invalid UTF-8 bytes': { appId: invalidUtf8 },
};

describe('encodableProperties', () => {
  for (const [label, raw] of Object.entries(refused)) {
    it(`${label}: amqplib refuses it as decoded; left out and named, the rest carried as it was`, () => {
      const decoded = { ...received({ ...raw, messageId: 'm-1', priority: 3 }), persistent: true };
      const name = Object.keys(raw)[0]!;
      assert.throws(() => republished(decoded), /Field '\w+'|out of range|RangeError/);
      const { properties, omitted } = encodableProperties(decoded);
      assert.deepEqual(omitted, [name]);
      const copy = republished(properties);
      assert.equal(copy[name], undefined);
      assert.deepEqual([copy.messageId, copy.priority, copy.deliveryMode], ['m-1', 3, 2]);
      assert.deepEqual((copy.headers as Record<string, unknown>)[PROPERTIES_OMITTED_HEADER], [name]);
    });
  }

  it('a messageId of 255 invalid UTF-8 bytes is replaced by sha256 of it, named, and signed as carried', () => {
    const decoded = received({ messageId: invalidUtf8, timestamp: 2n ** 64n - 1n });
    assert.equal(Buffer.byteLength(decoded.messageId as string), 765);
    const { properties, omitted } = encodableProperties(decoded);
    assert.deepEqual(omitted, ['messageId', 'timestamp']);
    assert.match(properties.messageId as string, /^sha256:[0-9a-f]{64}$/);
    assert.equal(properties.messageId, carriedMessageId(decoded.messageId as string));
    const copy = republished(properties);
    assert.equal(copy.messageId, properties.messageId, 'the receiver reads the value the copy was signed with');
    assert.deepEqual((copy.headers as Record<string, unknown>)[PROPERTIES_OMITTED_HEADER], ['messageId', 'timestamp']);
  });

  it('values at the edge amqplib can write are carried and decode back the same', () => {
    const edge = received({
      messageId: Buffer.alloc(85, 0xff), // 255 bytes once decoded
      type: 'x'.repeat(255),
      correlationId: '',
      timestamp: 2n ** 63n,
      priority: 255,
      deliveryMode: 2,
      expiration: '600000',
      userId: 'guest',
      appId: 'é'.repeat(127),
    });
    const result = encodableProperties(edge);
    assert.deepEqual(result.omitted, []);
    assert.equal(result.properties, edge, 'nothing to change: the same object');
    const copy = republished(edge);
    for (const [name, value] of Object.entries(edge))
      if (value !== undefined) assert.deepEqual(copy[name], value, name);
  });

  it('a timestamp below 2^64 that decoding rounded is carried as decoded', () => {
    const decoded = received({ timestamp: 2n ** 64n - 4097n });
    assert.deepEqual(encodableProperties(decoded).omitted, []);
    assert.equal(republished(decoded).timestamp, decoded.timestamp);
  });

  it('values no decoder produces (a caller or a stored row) are left out, not sent changed', () => {
    const { properties, omitted } = encodableProperties({
      messageId: 'm',
      timestamp: 1.5,
      priority: 256,
      deliveryMode: -1,
      type: 7,
      expiration: 600000,
      clusterId: 'c',
      persistent: undefined,
    });
    assert.deepEqual(omitted, ['type', 'deliveryMode', 'priority', 'timestamp', 'clusterId']);
    assert.deepEqual(republished(properties).expiration, '600000');
    // With `persistent` given amqplib never sends deliveryMode: nothing of it is lost.
    assert.deepEqual(encodableProperties({ messageId: 'm', deliveryMode: 300, persistent: true }).omitted, []);
  });

  it('is idempotent, and a copy of a copy extends the marker with property names only', () => {
    const once = encodableProperties(received({ type: invalidUtf8, headers: { a: 'b' } }));
    const twice = encodableProperties(once.properties);
    assert.equal(twice.properties, once.properties);
    assert.deepEqual(twice.omitted, []);
    const forged = { [PROPERTIES_OMITTED_HEADER]: ['appId', 'not-a-property', 7], a: 'b' };
    const next = encodableProperties({ ...received({ timestamp: 2n ** 64n - 1n }), headers: forged });
    assert.deepEqual(next.properties.headers, { a: 'b', [PROPERTIES_OMITTED_HEADER]: ['appId', 'timestamp'] });
    assert.deepEqual(once.properties.headers, { a: 'b', [PROPERTIES_OMITTED_HEADER]: ['type'] });
  });

  it('a messageId that fits is kept; a substitute is stable, distinct and fits', () => {
    assert.equal(carriedMessageId('evt-1'), 'evt-1');
    assert.equal(carriedMessageId('€'.repeat(85)), '€'.repeat(85));
    const long = '€'.repeat(86);
    assert.equal(carriedMessageId(long), carriedMessageId(long));
    assert.notEqual(carriedMessageId(long), carriedMessageId(`${long}x`));
    assert.ok(Buffer.byteLength(carriedMessageId(long)) <= 255);
  });
});

describe('copyProperties', () => {
  it('leaves out userId (the broker refuses a user-id other than the publishing login) and names it', () => {
    const { properties, omitted } = copyProperties({
      messageId: 'm-1',
      userId: 'producer',
      appId: 'orders',
      headers: {},
    });
    assert.deepEqual(omitted, ['userId']);
    assert.deepEqual(properties, {
      messageId: 'm-1',
      appId: 'orders',
      headers: { [PROPERTIES_OMITTED_HEADER]: ['userId'] },
    });
    // Without a userId nothing changes: the very object comes back.
    const plain = { messageId: 'm-2', headers: {} };
    assert.equal(copyProperties(plain).properties, plain);
    // Only copies: a publish of converge's own (the relay's) keeps what it set.
    assert.deepEqual(encodableProperties({ userId: 'relay' }).omitted, []);
  });
});
