import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Idle } from '../../src/runtime/sleep.js';

/**
 * setTimeout is faked in these tests, so a 60 s sleep can only end through wake()/close();
 * whether a promise has settled is read after the microtask queue has run (one setImmediate),
 * with no reference to the wall clock.
 */
function state(promise: Promise<unknown>): Promise<'settled' | 'pending'> {
  return Promise.race([
    promise.then(() => 'settled' as const),
    new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending'))),
  ]);
}

describe('Idle', () => {
  it('wake() ends a running sleep long before its timeout', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const idle = new Idle();
    const sleeping = idle.sleep(60_000);
    assert.equal(await state(sleeping), 'pending', 'the sleep waits while nobody wakes it');
    idle.wake();
    assert.equal(await state(sleeping), 'settled', 'wake() ended it without its 60 s timer firing');
  });

  it('a wake() while nobody sleeps makes the next sleep return at once, once', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const idle = new Idle();
    idle.wake();
    assert.equal(await state(idle.sleep(60_000)), 'settled', 'the pending wake-up was not lost');
    let finished = false;
    const second = idle.sleep(50).then(() => (finished = true));
    await Promise.resolve();
    assert.equal(finished, false, 'the pending wake-up is used up by one sleep');
    assert.equal(await state(second), 'pending', 'the second sleep waits for its timer');
    t.mock.timers.tick(50);
    await second;
    assert.equal(finished, true);
  });

  it('close() ends every sleep and makes later ones return at once', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const idle = new Idle();
    const sleeps = [idle.sleep(60_000), idle.sleep(60_000)];
    idle.close();
    assert.equal(await state(Promise.all(sleeps)), 'settled');
    assert.equal(await state(idle.sleep(60_000)), 'settled');
  });
});

describe('Idle.backoff', () => {
  it('is a floor: wake() does not end it, and a wake-up pending before it does not skip it', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const idle = new Idle();
    idle.wake();
    const waiting = idle.backoff(1_000);
    idle.wake();
    idle.wake();
    assert.equal(await state(waiting), 'pending', 'wake-ups (new work) do not cut a reconnect backoff');
    t.mock.timers.tick(999);
    assert.equal(await state(waiting), 'pending');
    t.mock.timers.tick(1);
    assert.equal(await state(waiting), 'settled', 'it ends when its time is up');
    assert.equal(await state(idle.sleep(60_000)), 'settled', 'the pending wake-up is kept for the next idle sleep');
  });

  it('close() ends it, and later ones return at once', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const idle = new Idle();
    const waiting = idle.backoff(60_000);
    idle.close();
    assert.equal(await state(waiting), 'settled', 'stop() never waits out a backoff');
    assert.equal(await state(idle.backoff(60_000)), 'settled');
  });
});
