import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  AMQPLIB_TABLE_BYTES,
  HEADERS_OMITTED_HEADER,
  encodableHeaders,
  headerTableBudget,
} from '../../src/transport/header-encoding.js';
import { encodeTable as rawTable } from '../support/raw-amqp.js';

/**
 * amqplib's own field-table codec (not exported by the package, so loaded by its file): what
 * the broker would hand a consumer of the copy is decode(encode(headers)).
 */
const require = createRequire(import.meta.url);
const codec = require(path.join(path.dirname(require.resolve('amqplib')), 'lib/codec.js')) as {
  encodeTable(buffer: Buffer, value: unknown, offset: number): number;
  decodeFields(slice: Buffer): Record<string, unknown>;
};

function encode(table: unknown): Buffer {
  const scratch = Buffer.alloc(AMQPLIB_TABLE_BYTES + 4);
  const length = codec.encodeTable(scratch, table, 0);
  return scratch.subarray(4, length);
}

/** What a consumer decodes from a header table sent with these bytes. */
const decode = (content: Buffer) => codec.decodeFields(content);

/** One field value of each wire type, as the table content a raw publisher sends. */
function field(tag: string, value: Buffer): Buffer {
  return Buffer.concat([Buffer.from([1, 0x6b]), Buffer.from(tag), value]);
}
const u32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
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
const f32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeFloatBE(n);
  return b;
};

/** Wire values amqplib decodes into JS values its own encoder refuses or changes. */
const hostileKinds: Record<string, Buffer> = {
  'double NaN': field('d', f64(NaN)),
  'double -Infinity': field('d', f64(-Infinity)),
  'double -0': field('d', f64(-0)),
  'double 2^50 + 0.5': field('d', f64(2 ** 50 + 0.5)),
  'float 1.5': field('f', f32(1.5)),
  'float NaN': field('f', f32(NaN)),
  'int64 2^63 - 1': field('l', i64(2n ** 63n - 1n)),
  'int64 -2^63': field('l', i64(-(2n ** 63n))),
  'timestamp near 2^64': field('T', Buffer.from('fffffffffffffff0', 'hex')),
  timestamp: field('T', i64(1_700_000_000n)),
  decimal: field('D', Buffer.concat([Buffer.from([2]), u32(12345)])),
  'unsigned byte 200': field('B', Buffer.from([200])),
  'unsigned short 65535': field('u', Buffer.from([0xff, 0xff])),
  'unsigned int 2^32 - 1': field('i', u32(2 ** 32 - 1)),
  bytes: field('x', Buffer.concat([u32(3), Buffer.from([0, 0xff, 0x80])])),
  void: field('V', Buffer.alloc(0)),
  'array of those': field(
    'A',
    (() => {
      const items = Buffer.concat([
        Buffer.from('d'),
        f64(NaN),
        Buffer.from('T'),
        i64(5n),
        Buffer.from('x'),
        u32(1),
        Buffer.from([7]),
        Buffer.from('V'),
      ]);
      return Buffer.concat([u32(items.length), items]);
    })(),
  ),
  'table with a ! key': field(
    'F',
    (() => {
      const inner = rawTable({ '!': 'nonsense', value: 1 });
      return Buffer.concat([u32(inner.length), inner]);
    })(),
  ),
  'key widened past 255 bytes': Buffer.concat([
    Buffer.from([200]),
    Buffer.alloc(200, 0xff),
    Buffer.from('S'),
    u32(1),
    Buffer.from('v'),
  ]),
};

describe('encodableHeaders', () => {
  for (const [kind, bytes] of Object.entries(hostileKinds)) {
    it(`${kind}: encodes without a throw and decodes back as it was, or is omitted and named`, () => {
      const decoded = { ...decode(bytes), keep: 'me' };
      const { headers, omitted } = encodableHeaders(decoded);
      const again = decode(encode(headers));
      const { [HEADERS_OMITTED_HEADER]: marker, ...carried } = again;
      if (omitted.length === 0) {
        assert.deepEqual(carried, decoded);
        assert.equal(marker, undefined);
      } else {
        const { keep, ...rest } = decoded;
        assert.deepEqual(carried, { keep });
        assert.deepEqual(omitted, Object.keys(rest));
        // The marker cuts a name over 255 bytes short, so the marker itself stays small.
        const listed = omitted.map((name) =>
          Buffer.byteLength(name) > 255 ? `${Buffer.from(name).subarray(0, 200).toString()}…` : name,
        );
        assert.deepEqual(marker, listed);
      }
    });
  }

  it('carries every kind amqplib can write; omits only a table with a ! key and a key over 255 bytes', () => {
    const omittedKinds = Object.entries(hostileKinds)
      .filter(([, bytes]) => encodableHeaders(decode(bytes)).omitted.length > 0)
      .map(([kind]) => kind);
    assert.deepEqual(omittedKinds, ['timestamp near 2^64', 'table with a ! key', 'key widened past 255 bytes']);
  });

  it('is idempotent: its own output comes back unchanged', () => {
    const all = Object.assign({}, ...Object.values(hostileKinds).map((bytes, i) => ({ [`h${i}`]: decode(bytes).k })));
    const once = encodableHeaders(all);
    const twice = encodableHeaders(once.headers);
    assert.deepEqual(twice.headers, once.headers);
    assert.deepEqual(twice.omitted, []);
    assert.equal(twice.bytes, once.bytes);
  });

  it('measures the bytes amqplib writes', () => {
    const headers = Object.fromEntries(
      Object.values(hostileKinds)
        .map((bytes, i) => [`h${i}`, decode(bytes).k] as const)
        .filter(([, value]) => value !== undefined),
    );
    const { headers: out, bytes } = encodableHeaders({ ...headers, s: 'é', n: 70_000, m: -40_000, big: 2 ** 40 });
    assert.equal(bytes, encode(out).length);
  });

  it('leaves the largest out when the table is over the budget, and names them', () => {
    const big = 'x'.repeat(40_000);
    const { headers, omitted, bytes } = encodableHeaders(
      { a: big, b: big, 'x-converge-attempt': 2, small: 1 },
      AMQPLIB_TABLE_BYTES,
    );
    assert.deepEqual(omitted, ['a']);
    assert.deepEqual(Object.keys(headers), ['b', 'x-converge-attempt', 'small', HEADERS_OMITTED_HEADER]);
    assert.ok(bytes <= AMQPLIB_TABLE_BYTES);
    assert.equal(encode(headers).length, bytes);
  });

  it('keeps a table within the entries the receiving guard allows', () => {
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]));
    const { omitted } = encodableHeaders({ ...many, 'x-converge-attempt': 1 });
    assert.ok(omitted.length > 0);
  });

  it('extends the marker of a copy of a copy', () => {
    const { headers } = encodableHeaders({ [HEADERS_OMITTED_HEADER]: ['old'], bad: { '!': 'nope', value: 1 } });
    assert.deepEqual(headers[HEADERS_OMITTED_HEADER], ['old', 'bad']);
  });

  it('never sends a __proto__ key, at any depth', () => {
    const parsed = JSON.parse('{"__proto__": {"x-converge-attempt": 9}, "t": {"__proto__": 1}, "ok": 1}') as object;
    const { headers, omitted } = encodableHeaders(parsed);
    assert.deepEqual(omitted, ['__proto__', 't']);
    assert.equal(decode(encode(headers)).ok, 1);
    assert.equal(Object.getPrototypeOf(decode(encode(headers))), Object.prototype);
  });

  it('carries what only a caller gives: bigint, Uint8Array; refuses functions and class instances', () => {
    const { headers, omitted } = encodableHeaders({
      big: 12n,
      bytes: new Uint8Array([1, 2]),
      fn: () => 1,
      date: new Date(0),
      nested: [undefined],
      gone: undefined,
    });
    assert.deepEqual(omitted, ['fn', 'date', 'nested']);
    assert.deepEqual(decode(encode(headers)).big, 12);
    assert.deepEqual(decode(encode(headers)).bytes, Buffer.from([1, 2]));
  });

  it('sizes the budget from frame_max, capped by amqplib scratch buffer', () => {
    assert.equal(headerTableBudget(131_072), AMQPLIB_TABLE_BYTES);
    assert.equal(headerTableBudget(0), AMQPLIB_TABLE_BYTES);
    assert.equal(headerTableBudget(8192), 4096);
  });
});
