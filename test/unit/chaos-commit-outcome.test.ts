/** The chaos producers count an event only when it is known committed: a failed COMMIT is asked about, never guessed. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countedCommit, type AskOptions } from '../../chaos/commit-outcome.js';

/** A clock that moves only when the code under test sleeps, and a record of what it asked. */
function asking(answers: (boolean | Error)[], timeoutMs = 1_000): AskOptions & { asked: string[] } {
  let clock = 0;
  const asked: string[] = [];
  return {
    asked,
    present: (eventId) => {
      asked.push(eventId);
      const answer = answers.shift() ?? new Error('no writable server');
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
    timeoutMs,
    retryMs: 100,
    now: () => clock,
    sleep: (ms) => {
      clock += ms;
      return Promise.resolve();
    },
  };
}

const lostAnswer = new Error('Connection terminated unexpectedly');

test('a COMMIT that returned counts, and nobody is asked', async () => {
  const ask = asking([]);
  const counted = await countedCommit(async (written) => written('e1'), ask);
  assert.deepEqual(counted, { outcome: 'committed', eventId: 'e1' });
  assert.deepEqual(ask.asked, []);
});

test('a failure before the event was written rolled back whole: not counted, nobody asked', async () => {
  const ask = asking([true]);
  const failure = new Error('terminating connection due to administrator command');
  const counted = await countedCommit(() => Promise.reject(failure), ask);
  assert.equal(counted.outcome, 'rolled-back');
  assert.equal(counted.eventId, undefined);
  assert.equal(counted.error, failure);
  assert.deepEqual(ask.asked, []);
});

test('a failed COMMIT whose event the writable server has counts, once it says so', async () => {
  // No writable server twice (the standby not yet promoted), then the promoted standby has it.
  const ask = asking([new Error('none of the 2 hosts gave a read-write session'), lostAnswer, true]);
  const counted = await countedCommit(async (written) => {
    written('e2');
    throw lostAnswer;
  }, ask);
  assert.equal(counted.outcome, 'in-doubt-there');
  assert.equal(counted.eventId, 'e2');
  assert.deepEqual(ask.asked, ['e2', 'e2', 'e2']);
});

test('a failed COMMIT whose event the writable server lacks is not counted', async () => {
  const ask = asking([false]);
  const counted = await countedCommit(async (written) => {
    written('e3');
    throw lostAnswer;
  }, ask);
  assert.equal(counted.outcome, 'in-doubt-absent');
  assert.equal(counted.eventId, undefined);
});

test('no answer before the deadline: a maybe, never counted', async () => {
  const ask = asking([], 1_000);
  const counted = await countedCommit(async (written) => {
    written('e4');
    throw lostAnswer;
  }, ask);
  assert.equal(counted.outcome, 'in-doubt-unknown');
  assert.equal(counted.eventId, undefined);
  // Asked every retryMs until the timeout, then once more at the deadline.
  assert.equal(ask.asked.length, 11);
});

test('a transaction that commits without writing its event is a bug in the producer, not a count', async () => {
  await assert.rejects(
    countedCommit(() => Promise.resolve(), asking([])),
    /committed without writing its event/,
  );
});
