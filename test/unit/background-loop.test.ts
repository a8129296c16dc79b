import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackgroundLoop } from '../../src/runtime/background-loop.js';

function owner(failure?: Error) {
  const calls = { stop: 0 };
  return { calls, failure, stop: async () => void calls.stop++ };
}

test('start runs the loop once, however often it is called', async () => {
  const loop = new BackgroundLoop();
  const component = owner();
  let runs = 0;
  const run = async () => void runs++;
  loop.start(component, run, false);
  loop.start(component, run, false);
  await loop.ended();
  assert.equal(runs, 1);
});

test('a loop that ended on a permanent failure stops its owner; one that ended otherwise does not', async () => {
  for (const [failure, stops] of [
    [new Error('wrong password'), 1],
    [undefined, 0],
  ] as const) {
    const loop = new BackgroundLoop();
    const component = owner(failure);
    loop.start(component, async () => undefined, false);
    await loop.ended();
    assert.equal(component.calls.stop, stops);
  }
});

test('ended resolves at once for a loop never started, and removes the signal handlers of one that was', async () => {
  await new BackgroundLoop().ended();
  const before = process.listenerCount('SIGTERM');
  const loop = new BackgroundLoop();
  loop.start(owner(), async () => undefined, true);
  assert.equal(process.listenerCount('SIGTERM'), before + 1);
  await loop.ended();
  assert.equal(process.listenerCount('SIGTERM'), before);
});
