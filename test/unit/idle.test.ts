import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Idle } from '../../src/runtime/sleep.js';

describe('Idle', () => {
  it('wake() ends a running sleep long before its timeout', async () => {
    const idle = new Idle();
    const started = Date.now();
    const sleeping = idle.sleep(60_000);
    idle.wake();
    await sleeping;
    assert.ok(Date.now() - started < 1_000);
  });

  it('a wake() while nobody sleeps makes the next sleep return at once, once', async () => {
    const idle = new Idle();
    idle.wake();
    const started = Date.now();
    await idle.sleep(60_000);
    assert.ok(Date.now() - started < 1_000, 'the pending wake-up was not lost');
    let finished = false;
    const second = idle.sleep(50).then(() => (finished = true));
    await Promise.resolve();
    assert.equal(finished, false, 'the pending wake-up is used up by one sleep');
    await second;
  });

  it('close() ends every sleep and makes later ones return at once', async () => {
    const idle = new Idle();
    const sleeps = [idle.sleep(60_000), idle.sleep(60_000)];
    idle.close();
    await Promise.all(sleeps);
    const started = Date.now();
    await idle.sleep(60_000);
    assert.ok(Date.now() - started < 1_000);
  });
});
