import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeProperties, encodeProperties, messageHash, storableString } from '../../src/inbox/stored-properties.js';

const hostile = {
  messageId: 'm\u0000',
  type: 'x\ud800y',
  headers: { 'k\u0000': 'v\u0000\u0001', nested: { ['a\u0000']: ['\u0000', 1] }, big: 12n },
};

describe('stored properties', () => {
  it('keeps the exact properties as JSON text without a raw U+0000, and gives jsonb a copy it can hold', () => {
    const { exact, queryable } = encodeProperties(hostile);
    assert.ok(!exact.includes('\u0000'), 'JSON escapes U+0000');
    assert.deepEqual(decodeProperties(exact, null), { ...hostile, headers: { ...hostile.headers, big: '12' } });
    assert.ok(!queryable.includes('\\u0000') && !/\\ud800/i.test(queryable), queryable);
    assert.deepEqual(JSON.parse(queryable), {
      messageId: 'm\ufffd',
      type: 'x\ufffdy',
      headers: { 'k\ufffd': 'v\ufffd\u0001', nested: { 'a\ufffd': ['\ufffd', 1] }, big: '12' },
    });
  });

  it('gives back bytes as bytes and the numbers JSON cannot hold, at any depth', () => {
    const properties = {
      messageId: 'm',
      headers: {
        x: Buffer.from([0, 0xff, 0x80]),
        nested: { a: [Buffer.alloc(0), NaN] },
        nan: NaN,
        inf: Infinity,
        ninf: -Infinity,
        zero: -0,
        // A table that only looks like a tagged value stays a table.
        lookalike: { '$converge.bytes': 'AA==', other: 1 },
      },
    };
    const { exact, queryable } = encodeProperties(properties);
    const back = decodeProperties<typeof properties>(exact, null as never);
    assert.deepEqual(back, properties);
    assert.ok(Buffer.isBuffer(back.headers.x));
    assert.ok(Object.is(back.headers.zero, -0));
    assert.doesNotThrow(() => JSON.parse(queryable) as unknown);
  });

  it('reads a Buffer a row stored before the tag (as JSON.stringify wrote it) as bytes', () => {
    const old = JSON.stringify({ headers: { x: Buffer.from([1, 2]) } });
    assert.match(old, /"type":"Buffer"/);
    assert.deepEqual(decodeProperties(old, null), { headers: { x: Buffer.from([1, 2]) } });
  });

  it('reads rows from before the exact column from jsonb', () => {
    const old = { messageId: 'm' };
    assert.equal(decodeProperties(null, old), old);
  });

  it('replaces only what text columns cannot hold', () => {
    assert.equal(storableString('a\u0000b\udc00c😀\u0001'), 'a\ufffdb\ufffdc😀\u0001');
  });

  it("hashes body and properties, ignoring converge's per-trip headers", () => {
    const content = Buffer.from('{"x":1}');
    const base = messageHash({ content, properties: hostile });
    assert.equal(messageHash({ content: Buffer.from('{"x":1}'), properties: structuredClone(hostile) }), base);
    const retried = {
      ...hostile,
      headers: {
        ...hostile.headers,
        'x-converge-attempt': 3,
        'x-converge-original-exchange': 'e',
        'x-converge-original-routing-key': 'k',
        'x-converge-replay-of': '7',
      },
    };
    assert.equal(messageHash({ content, properties: retried }), base);
    assert.notEqual(messageHash({ content: Buffer.from('{"x":2}'), properties: hostile }), base);
    assert.notEqual(messageHash({ content, properties: { ...hostile, messageId: 'other' } }), base);
    // The length prefix keeps properties and body apart: moving bytes across the boundary changes the hash.
    assert.notEqual(
      messageHash({ content: Buffer.from('b'), properties: {} }),
      messageHash({ content: Buffer.from(''), properties: {} }),
    );
  });
});
