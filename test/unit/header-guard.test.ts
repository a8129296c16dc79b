import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { guardConnection, guardContentHeader, headerRejectionOf } from '../../src/transport/header-guard.js';
import type amqp from 'amqplib';
import { encodeProperties, nestedTable } from '../support/raw-amqp.js';

function headerFrame(channel: number, bodySize: number, properties: Buffer): Buffer {
  const payload = Buffer.alloc(12);
  payload.writeUInt16BE(60, 0);
  payload.writeBigUInt64BE(BigInt(bodySize), 4);
  const head = Buffer.alloc(7);
  head.writeUInt8(2, 0);
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(12 + properties.length, 3);
  return Buffer.concat([head, payload, properties, Buffer.from([0xce])]);
}

const BODY_FRAME = Buffer.from([3, 0, 1, 0, 0, 0, 2, 0x7b, 0x7d, 0xce]);
const deep = encodeProperties({ messageId: 'M-1', type: 'OrderPaid' }, nestedTable(4_000));

describe('header guard', () => {
  it('answers an over-deep content header itself: amqplib frame shape, headers empty, rejection recorded', () => {
    const rest = Buffer.concat([headerFrame(3, 2, deep), BODY_FRAME]);
    const guarded = guardContentHeader(rest, 131_072);
    assert.ok(guarded?.action === 'set-aside');
    assert.deepEqual(guarded.frame, {
      id: 60,
      channel: 3,
      size: 2,
      fields: { messageId: 'M-1', type: 'OrderPaid', headers: {} },
    });
    assert.ok(guarded.rest.equals(BODY_FRAME), 'the next frame is left for amqplib');
    const rejection = headerRejectionOf(guarded.frame.fields);
    assert.equal(rejection?.bound, 'depth');
    assert.ok(rejection.raw.equals(nestedTable(4_000)));
  });

  it('leaves amqplib every other frame: within bounds, incomplete, another type, over its frame limit', () => {
    const fine = headerFrame(1, 2, encodeProperties({ messageId: 'M-1', headers: { a: { b: 1 } } }));
    assert.equal(guardContentHeader(fine, 131_072)?.action, 'decode');
    const bad = headerFrame(1, 2, deep);
    assert.equal(guardContentHeader(bad.subarray(0, bad.length - 1), 131_072), null);
    assert.equal(guardContentHeader(BODY_FRAME, 131_072), null);
    assert.equal(guardContentHeader(bad, 1_000), null, 'amqplib reports an oversized frame its own way');
    assert.equal(guardContentHeader(bad, 0)?.action, 'set-aside', '0 is no limit');
  });

  it('wraps recvFrame on the one connection object, or changes nothing when amqplib is not as expected', () => {
    const frames: unknown[] = [];
    const connection = {
      rest: Buffer.concat([headerFrame(1, 2, deep), BODY_FRAME]),
      maxFrameSize: 131_072,
      recvFrame(this: { rest: Buffer }) {
        frames.push('amqplib');
        this.rest = Buffer.alloc(0);
        return false;
      },
    };
    assert.equal(guardConnection({ connection } as unknown as amqp.ChannelModel), true);
    const first = connection.recvFrame() as unknown as { id: number };
    assert.equal(first.id, 60);
    assert.deepEqual(frames, []);
    connection.recvFrame();
    assert.deepEqual(frames, ['amqplib']);
    assert.equal(guardConnection({ connection: {} } as unknown as amqp.ChannelModel), false);
  });

  it('sets every property aside when amqplib throws on a header the bounds let through', () => {
    const fine = headerFrame(1, 2, encodeProperties({ messageId: 'M-1', headers: { a: 1 } }));
    const connection = {
      rest: Buffer.concat([fine, BODY_FRAME]),
      recvFrame(this: { rest: Buffer }): unknown {
        // as amqplib: the frame is taken off `rest` before it is decoded
        this.rest = this.rest.subarray(fine.length);
        throw new RangeError('decoder broke');
      },
    };
    assert.equal(guardConnection({ connection } as unknown as amqp.ChannelModel), true);
    const frame = connection.recvFrame() as { id: number; size: number; fields: object };
    assert.equal(frame.id, 60);
    assert.equal(frame.size, 2);
    assert.deepEqual(frame.fields, {});
    const rejection = headerRejectionOf(frame.fields);
    assert.equal(rejection?.bound, 'malformed');
    assert.equal(rejection.detail, 'basic properties amqplib could not decode');
    assert.ok(rejection.raw.equals(encodeProperties({ messageId: 'M-1', headers: { a: 1 } })));
    assert.ok(connection.rest.equals(BODY_FRAME));
  });
});
