import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import type { ConfirmChannel } from 'amqplib';
import { PublishError } from '../../src/runtime/errors.js';
import { ConfirmPublisher } from '../../src/transport/publisher.js';

/** A channel whose publish throws as amqplib's does when it cannot encode the properties. */
function throwingChannel(): ConfirmChannel & { sent: unknown[] } {
  const channel = Object.assign(new EventEmitter(), {
    sent: [] as unknown[],
    connection: { frameMax: 131_072 },
    publish(_exchange: string, _key: string, _content: Buffer, options: { headers?: unknown }) {
      channel.sent.push(options.headers);
      throw new TypeError("Field 'messageId' is the wrong type; must be a string (up to 255 chars)");
    },
    close: () => Promise.resolve(),
  });
  return channel as unknown as ConfirmChannel & { sent: unknown[] };
}

describe('ConfirmPublisher', () => {
  it('rejects a publish amqplib refused synchronously at once, leaving nothing pending', async () => {
    const channel = throwingChannel();
    let timeouts = 0;
    const publisher = new ConfirmPublisher(channel, () => timeouts++);
    const result = publisher.publish('', 'q', Buffer.from('{}'), { messageId: 'm' }, 50);
    const err = await result.catch((e: unknown) => e);
    assert.ok(err instanceof PublishError);
    assert.equal(err.reason, 'unencodable');
    assert.equal(
      err.message,
      'publish unencodable: amqplib could not encode the message (TypeError in property messageId)',
    );
    // An orphan entry would time out now and mark the channel suspect; retire() would never resolve.
    await publisher.retire();
    assert.equal(timeouts, 0);
  });

  it('hands amqplib headers it can encode, naming what it left out', async () => {
    const channel = throwingChannel();
    const publisher = new ConfirmPublisher(channel);
    await publisher
      .publish('', 'q', Buffer.from('{}'), { messageId: 'm', headers: { a: -0, bad: { '!': 'x', value: 1 } } }, 50)
      .catch(() => undefined);
    assert.deepEqual(channel.sent, [{ a: { '!': 'double', value: -0 }, 'x-converge-headers-omitted': ['bad'] }]);
  });

  it('hands amqplib properties it can encode, naming what it left out, and matches a return by the id it sent', async () => {
    const sent: Record<string, unknown>[] = [];
    const channel = Object.assign(new EventEmitter(), {
      connection: { frameMax: 131_072 },
      publish(_e: string, _k: string, _c: Buffer, options: Record<string, unknown>, done: (err?: unknown) => void) {
        sent.push(options);
        // The broker returns the message as it received it, then acks it.
        channel.emit('return', { properties: { messageId: options.messageId } });
        done();
      },
      close: () => Promise.resolve(),
    });
    const publisher = new ConfirmPublisher(channel as unknown as ConfirmChannel);
    const long = '\uFFFD'.repeat(255);
    const err = await publisher
      .publish('', 'q', Buffer.from('{}'), { messageId: long, timestamp: 2 ** 64, type: 'T' }, 50)
      .catch((e: unknown) => e);
    assert.ok(err instanceof PublishError);
    assert.equal(err.reason, 'returned', 'the return of the copy is matched by the messageId it carried');
    assert.match(String(sent[0]!.messageId), /^sha256:[0-9a-f]{64}$/);
    assert.equal(sent[0]!.timestamp, undefined);
    assert.equal(sent[0]!.type, 'T');
    assert.deepEqual(sent[0]!.headers, { 'x-converge-properties-omitted': ['messageId', 'timestamp'] });
    await publisher.close();
  });
});
