import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import type { ConfirmChannel } from 'amqplib';
import { BlockState } from '../../src/relay/blocked.js';
import { ConfirmPublisher } from '../../src/transport/publisher.js';
import { PublishError } from '../../src/runtime/errors.js';

describe('BlockState', () => {
  it('reports a block once, keeps the latest reason, and ends it once', () => {
    const state = new BlockState();
    assert.equal(state.blocked, false);
    assert.equal(state.block('low on memory', 10), true);
    assert.equal(state.block('low on disk', 11), false, 'a repeated notification starts no new block');
    assert.equal(state.blocked, true);
    assert.equal(state.reason, 'low on disk');
    assert.equal(state.unblock(20), true);
    assert.equal(state.unblock(21), false);
    assert.equal(state.blocked, false);
    assert.equal(state.reason, undefined);
  });

  it('says whether a publish waited on a block: blocked now, or a block ended after it was sent', () => {
    const state = new BlockState();
    assert.equal(state.overlaps(5), false, 'never blocked');
    state.block(undefined, 10);
    assert.equal(state.overlaps(5), true, 'sent before the block, which still lasts');
    assert.equal(state.overlaps(15), true, 'sent during the block');
    state.unblock(20);
    assert.equal(state.overlaps(5), true, 'sent before a block that ended since');
    assert.equal(state.overlaps(20), true, 'sent the moment it ended');
    assert.equal(state.overlaps(25), false, 'sent after the block ended');
  });
});

/** The part of a confirm channel ConfirmPublisher uses: publish with a confirm callback. */
class FakeChannel extends EventEmitter {
  readonly confirms: ((err: unknown) => void)[] = [];
  publish(
    _exchange: string,
    _key: string,
    _content: Buffer,
    _options: unknown,
    confirm: (err: unknown) => void,
  ): boolean {
    this.confirms.push(confirm);
    return true;
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

function state(promise: Promise<unknown>): Promise<'resolved' | 'rejected' | 'pending'> {
  return Promise.race([
    promise.then(
      () => 'resolved' as const,
      () => 'rejected' as const,
    ),
    new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending'))),
  ]);
}

describe('ConfirmPublisher confirm timeouts while the connection is blocked', () => {
  function publisher(): { channel: FakeChannel; publisher: ConfirmPublisher } {
    const channel = new FakeChannel();
    return { channel, publisher: new ConfirmPublisher(channel as unknown as ConfirmChannel) };
  }

  it('holds the timeout of publishes in flight and new ones, and gives each its full timeout on resume', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { channel, publisher: p } = publisher();
    const before = p.publish('x', 'k', Buffer.from('a'), { messageId: 'a' }, 1_000);
    before.catch(() => undefined);
    t.mock.timers.tick(900);
    p.holdTimeouts();
    const during = p.publish('x', 'k', Buffer.from('b'), { messageId: 'b' }, 1_000);
    during.catch(() => undefined);
    t.mock.timers.tick(60_000);
    assert.equal(await state(before), 'pending', 'no timeout while held');
    assert.equal(await state(during), 'pending');
    p.resumeTimeouts();
    t.mock.timers.tick(999);
    assert.equal(await state(before), 'pending', 'a full timeout again after the block, not the 100 ms left');
    channel.confirms[1]!(null);
    assert.equal(await state(during), 'resolved', 'a confirm after the block settles it');
    t.mock.timers.tick(1);
    await assert.rejects(before, (err: unknown) => err instanceof PublishError && err.reason === 'confirm-timeout');
  });

  it('a confirm that comes after the timeout changes nothing', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { channel, publisher: p } = publisher();
    const publish = p.publish('x', 'k', Buffer.from('a'), { messageId: 'a' }, 100);
    t.mock.timers.tick(100);
    await assert.rejects(publish, (err: unknown) => err instanceof PublishError && err.reason === 'confirm-timeout');
    channel.confirms[0]!(null);
    assert.equal(await state(publish), 'rejected');
  });

  it('close() fails the publishes in flight at once, even while held', async () => {
    const { publisher: p } = publisher();
    p.holdTimeouts();
    const publish = p.publish('x', 'k', Buffer.from('a'), { messageId: 'a' }, 100);
    await p.close();
    await assert.rejects(publish, (err: unknown) => err instanceof PublishError && err.reason === 'channel-closed');
  });
});

describe('ConfirmPublisher confirm timeouts shared by a batch', () => {
  it('publishes sent in one turn share a timer; a later one counts from its own send', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const channel = new FakeChannel();
    const p = new ConfirmPublisher(channel as unknown as ConfirmChannel);
    const batch = ['a', 'b', 'c'].map((id) => p.publish('x', 'k', Buffer.from(id), { messageId: id }, 1_000));
    for (const publish of batch) publish.catch(() => undefined);
    await new Promise<void>((resolve) => setImmediate(resolve));
    t.mock.timers.tick(500);
    const later = p.publish('x', 'k', Buffer.from('d'), { messageId: 'd' }, 1_000);
    later.catch(() => undefined);
    channel.confirms[1]!(null);
    t.mock.timers.tick(500);
    await assert.rejects(batch[0]!, (err: unknown) => err instanceof PublishError && err.reason === 'confirm-timeout');
    assert.equal(await state(batch[1]!), 'resolved', 'confirmed in time');
    await assert.rejects(batch[2]!, (err: unknown) => err instanceof PublishError && err.reason === 'confirm-timeout');
    assert.equal(await state(later), 'pending', 'sent 500 ms later, it has 500 ms left');
    t.mock.timers.tick(500);
    await assert.rejects(later, (err: unknown) => err instanceof PublishError && err.reason === 'confirm-timeout');
  });

  it('a batch confirmed in full leaves no timeout behind', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const channel = new FakeChannel();
    let timeouts = 0;
    const p = new ConfirmPublisher(channel as unknown as ConfirmChannel, () => timeouts++);
    const batch = ['a', 'b'].map((id) => p.publish('x', 'k', Buffer.from(id), { messageId: id }, 100));
    for (const confirm of channel.confirms) confirm(null);
    await Promise.all(batch);
    t.mock.timers.tick(1_000);
    assert.equal(timeouts, 0);
  });
});
