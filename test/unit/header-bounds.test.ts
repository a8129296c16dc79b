import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_HEADER_BOUNDS,
  inspectBasicProperties,
  scanFieldTable,
  type HeaderBounds,
} from '../../src/transport/header-bounds.js';
import { encodeProperties, encodeTable, nestedTable, type TableValue } from '../support/raw-amqp.js';

// amqplib's own decoder, the one the scan stands in front of (not reachable through its package exports).
const require = createRequire(import.meta.url);
const codec = require(path.join(path.dirname(require.resolve('amqplib')), 'lib/codec.js')) as {
  decodeFields(bytes: Buffer): Record<string, unknown>;
};

const bounds = (over: Partial<HeaderBounds>): HeaderBounds => ({ ...DEFAULT_HEADER_BOUNDS, ...over });
const entry = (key: string, tag: string, rest: number[]) =>
  Buffer.from([key.length, ...Buffer.from(key), tag.charCodeAt(0), ...rest]);

describe('header bounds', () => {
  it('passes every field type amqplib decodes, nested in tables and arrays', () => {
    const table = Buffer.concat([
      encodeTable({
        s: 'text',
        n: 7,
        d: 1.5,
        t: true,
        v: null,
        x: Buffer.from([0, 1]),
        a: [1, 'b', [null]],
        f: { g: { h: 'i' } },
      }),
      entry('b', 'b', [0xff]),
      entry('u', 'u', [0, 1]),
      entry('i', 'I', [0, 0, 0, 1]),
      entry('D', 'D', [2, 0, 0, 0, 5]),
      entry('T', 'T', [0, 0, 0, 0, 0, 0, 0, 9]),
      entry('f', 'f', [0, 0, 0, 0]),
    ]);
    assert.deepEqual(scanFieldTable(table), { ok: true });
    assert.deepEqual(scanFieldTable(Buffer.alloc(0)), { ok: true });
  });

  it('counts the header table as level 1: 63 tables inside it pass the default depth of 64, 64 do not', () => {
    assert.deepEqual(scanFieldTable(nestedTable(63)), { ok: true });
    assert.deepEqual(scanFieldTable(nestedTable(64)), {
      ok: false,
      bound: 'depth',
      detail: 'header table nested deeper than 64 levels',
    });
    assert.equal(codec.decodeFields(nestedTable(63)).a !== undefined, true);
  });

  it('walks a table nested 100,000 deep without recursion, where amqplib overflows its stack', () => {
    const deep = nestedTable(100_000);
    assert.equal(scanFieldTable(deep, bounds({ maxDepth: 200_000, maxEntries: 200_000 })).ok, true);
    assert.equal(scanFieldTable(deep).ok, false);
    assert.throws(() => codec.decodeFields(nestedTable(4_000)), RangeError);
  });

  it('bounds the entries over every level and the bytes of the table', () => {
    const many = encodeTable(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, [1, 2, 3]])));
    assert.deepEqual(scanFieldTable(many, bounds({ maxEntries: 40 })), { ok: true });
    assert.deepEqual(scanFieldTable(many, bounds({ maxEntries: 39 })), {
      ok: false,
      bound: 'entries',
      detail: 'header table holds more than 39 entries',
    });
    assert.deepEqual(scanFieldTable(many, bounds({ maxBytes: many.length })), { ok: true });
    assert.deepEqual(scanFieldTable(many, bounds({ maxBytes: many.length - 1 })), {
      ok: false,
      bound: 'bytes',
      detail: `header table of ${many.length} bytes, over ${many.length - 1}`,
    });
  });

  it('calls malformed what no decoder can read, naming the offset and never the content', () => {
    const cases: [Buffer, string][] = [
      [entry('k', 'Z', [1]), 'unknown field type at byte 3'],
      [entry('k', 'S', [0, 0, 0, 9, 0x41]), 'length past its container at byte 3'],
      [entry('k', 'F', [0, 0, 0, 9, 0x41]), 'length past its container at byte 3'],
      [entry('k', 'l', [0, 0, 1]), 'truncated value at byte 3'],
      [Buffer.from([5, 0x6b]), 'truncated field at byte 6'],
      [entry('k', 'F', [0, 0]), 'truncated length at byte 3'],
      // a nested table ending inside its last field
      [Buffer.concat([entry('k', 'F', [0, 0, 0, 4]), entry('j', 'S', [0, 0, 0, 0])]), 'truncated length at byte 10'],
    ];
    for (const [bytes, detail] of cases)
      assert.deepEqual(scanFieldTable(bytes), {
        ok: false,
        bound: 'malformed',
        detail: `header table malformed: ${detail}`,
      });
  });

  it('never throws on any bytes, and whatever it passes amqplib decodes without throwing (property)', () => {
    const tagged = fc.uint8Array({ maxLength: 64 }).map((bytes) => {
      // Biased towards real tags so the walk goes deep, not just "unknown type" at byte 2.
      const tags = 'tbBsuIifDdlTVSxFA';
      return Buffer.from(bytes.map((b, i) => (i % 3 === 2 ? tags.charCodeAt(b % tags.length) : b)));
    });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
          tagged,
        ),
        (bytes) => {
          const scan = scanFieldTable(bytes, bounds({ maxDepth: 8, maxEntries: 50 }));
          if (scan.ok) codec.decodeFields(bytes);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('passes every table encodeTable writes within the depth bound, as amqplib decodes it (property)', () => {
    const { value } = fc.letrec<{ value: TableValue }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(fc.string({ maxLength: 5 }), tie('value'), { maxKeys: 3 }),
      ),
    }));
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 5 }), value, { maxKeys: 4 }), (headers) => {
        const bytes = encodeTable(headers);
        assert.deepEqual(scanFieldTable(bytes), { ok: true });
        codec.decodeFields(bytes);
      }),
      { numRuns: 500 },
    );
  });
});

describe('basic properties inspection', () => {
  const sent = {
    messageId: 'M-1',
    type: 'OrderPaid',
    contentType: 'application/json',
    timestamp: 1_700_000_000,
    deliveryMode: 2,
    appId: 'shop',
  };

  it('leaves properties within the bounds to amqplib', () => {
    assert.deepEqual(inspectBasicProperties(encodeProperties({ ...sent, headers: { 'x-a': { b: 1 } } })), { ok: true });
    assert.deepEqual(inspectBasicProperties(encodeProperties(sent)), { ok: true });
  });

  it('decodes the other properties itself and sets the over-deep table aside, bytes and all', () => {
    const table = nestedTable(4_000);
    const result = inspectBasicProperties(encodeProperties({ ...sent, correlationId: 'c', expiration: '5' }, table));
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.deepEqual(result.properties, { ...sent, correlationId: 'c', expiration: '5', headers: {} });
    assert.equal(result.rejection.bound, 'depth');
    assert.ok(result.rejection.raw.equals(table));
  });

  it('keeps all the bytes when a property outside the table is truncated', () => {
    const bytes = encodeProperties({ ...sent, headers: { k: 'v' } }).subarray(0, 30);
    const result = inspectBasicProperties(bytes);
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.equal(result.rejection.bound, 'malformed');
    assert.match(result.rejection.detail, /^basic properties malformed: \w+ truncated at byte \d+$/);
    assert.ok(result.rejection.raw.equals(bytes));
  });

  it('never throws on any bytes (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => void inspectBasicProperties(Buffer.from(bytes))),
      { numRuns: 2_000 },
    );
  });

  it('sets aside a table with a __proto__ key at any level, which amqplib would turn into a prototype', () => {
    const proto = (value: TableValue) => encodeTable({ __proto__: value } as unknown as Record<string, TableValue>);
    // encodeTable reads own keys: build the key from the bytes, since a literal __proto__ is no own key.
    const protoEntry = (value: Buffer) => Buffer.concat([Buffer.from([9]), Buffer.from('__proto__'), value]);
    const bytesValue = Buffer.from([0x78, 0, 0, 0, 2, 1, 2]);
    const inner = encodeTable({ 'x-converge-attempt': 1 });
    const tableValue = Buffer.concat([Buffer.from('F'), Buffer.from([0, 0, 0, inner.length]), inner]);
    assert.equal(proto(1).length, 0);
    const cases = {
      'top level, bytes': protoEntry(bytesValue),
      'top level, table': protoEntry(tableValue),
      'nested table': Buffer.concat([entry('a', 'F', [0, 0, 0, 11 + tableValue.length - 1]), protoEntry(tableValue)]),
    };
    for (const [name, bytes] of Object.entries(cases)) {
      const decoded = codec.decodeFields(bytes);
      const top = name === 'nested table' ? decoded.a : decoded;
      assert.notEqual(Object.getPrototypeOf(top), Object.prototype, `${name}: amqplib replaces the prototype`);
      const scan = scanFieldTable(bytes);
      assert.deepEqual(scan, { ok: false, bound: 'prototype-key', detail: scan.ok ? '' : scan.detail }, name);
    }
    // Inside an array there are no keys; a key that merely contains the name is an own key.
    assert.deepEqual(scanFieldTable(encodeTable({ a: ['__proto__'], __proto__x: 1, _proto__: 2 })), { ok: true });
  });
});
