/**
 * Remote side effects, once in effect (docs/remote-effects.md), against PostgreSQL and a fake
 * remote that deduplicates by key: a worker killed between the call and the record repeats the
 * call with the same key on its next run and the remote performs it once; a recorded outcome is
 * never called again; a permanent failure is kept, retryable ones are retried with backoff; and,
 * end to end, a handler's next-hop event reaches an effect handler whose redelivery calls nobody.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import {
  appendToOutbox,
  idempotencyKey,
  performEffect,
  readEffect,
  retryFailedEffect,
  type EffectOptions,
} from '../../src/index.js';
import { withInProcessFixture } from '../support/in-process-fixture.js';
import { startFakeRemote, sendMessage, type FakeRemote } from '../support/fake-remote.js';
import {
  DATABASE_URL,
  after,
  before,
  beforeEach,
  createTestSchema,
  describe,
  it,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';

let db: TestDatabase;
let remote: FakeRemote;

before(async () => {
  db = await createTestSchema('cvt_effects');
  remote = await startFakeRemote();
});

after(async () => {
  await remote?.close();
  await db?.close();
});

beforeEach(() => {
  remote.calls.length = 0;
  remote.performed.length = 0;
});

function sms(eventId: string, overrides: Partial<EffectOptions<{ receipt: string }>> = {}) {
  return performEffect<{ receipt: string }>(db.pool, {
    schema: db.schema,
    event: { eventId },
    effect: 'send-sms',
    call: (key, signal) => sendMessage(remote.url, key, signal),
    backoff: { initialDelayMs: 5, maxDelayMs: 20 },
    ...overrides,
  });
}

const record = (eventId: string) => readEffect(db.pool, { schema: db.schema, event: { eventId }, effect: 'send-sms' });

describe('performEffect', () => {
  it('a worker killed between the call and the record: the next run calls again with the same key, one effect', async () => {
    const eventId = randomUUID();
    const key = idempotencyKey({ eventId }, 'send-sms');
    const worker = spawn(process.execPath, ['--import', 'tsx', 'test/support/effects-kill-worker.ts'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        EFFECT_WORKER: JSON.stringify({
          connectionString: DATABASE_URL,
          schema: db.schema,
          eventId,
          remote: remote.url,
        }),
      },
    });
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code, signal] = (await once(worker, 'exit')) as [number | null, NodeJS.Signals | null];
    assert.equal(signal, 'SIGKILL', `the worker killed itself after the call (exit ${code}): ${output}`);
    assert.equal(output, `called ${key}\n`);
    assert.deepEqual(remote.performed, [key], 'the remote performed the effect before the crash');
    const crashed = await record(eventId);
    assert.equal(crashed?.status, 'pending', 'the outcome was never recorded');
    assert.equal(crashed?.attempts, 1);
    assert.equal(crashed?.completedAt, null);

    const outcome = await sms(eventId);
    assert.deepEqual(outcome, { status: 'completed', key, result: { receipt: 'r1' }, attempts: 2, calledNow: true });
    assert.deepEqual(remote.calls, [key, key], 'two calls, one key');
    assert.deepEqual(remote.performed, [key], 'one effect');
    const done = await record(eventId);
    assert.equal(done?.status, 'completed');
    assert.equal(done?.attempts, 2);
    assert.deepEqual(done?.result, { receipt: 'r1' });
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${db.schema}".effects WHERE event_id = $1`,
      [eventId],
    );
    assert.equal(rows[0]!.n, 1, 'one row per key');
  });

  it('a completed effect is not called again: a redelivery gets the recorded result', async () => {
    const eventId = randomUUID();
    const first = await sms(eventId);
    const again = await sms(eventId);
    assert.equal(first.status, 'completed');
    assert.deepEqual(again, { ...first, calledNow: false });
    assert.equal(remote.calls.length, 1);
    // Another effect of the same event is its own key and its own call.
    const email = await sms(eventId, { effect: 'send-email' });
    assert.notEqual(email.key, first.key);
    assert.equal(remote.calls.length, 2);
  });

  it('a permanent failure is recorded as failed, never called again, until a person retries it', async () => {
    const eventId = randomUUID();
    remote.failNext(422);
    const failed = await sms(eventId);
    assert.deepEqual(failed, {
      status: 'failed',
      key: idempotencyKey({ eventId }, 'send-sms'),
      error: 'CONVERGE_PERMANENT',
      attempts: 1,
      calledNow: true,
    });
    assert.equal((await sms(eventId)).calledNow, false, 'a redelivery does not call a failed key');
    assert.equal(remote.calls.length, 1);
    const kept = await record(eventId);
    assert.equal(kept?.status, 'failed');
    assert.equal(kept?.error, 'CONVERGE_PERMANENT', 'the kind of failure, not the message');

    assert.equal(await retryFailedEffect(db.pool, { schema: db.schema, event: { eventId }, effect: 'send-sms' }), true);
    const retried = await sms(eventId);
    assert.equal(retried.status, 'completed');
    assert.equal(retried.attempts, 2);
    assert.equal(remote.calls.length, 2);
    assert.equal(
      await retryFailedEffect(db.pool, { schema: db.schema, event: { eventId }, effect: 'send-sms' }),
      false,
    );
  });

  it('retryable failures back off and call again with the same key; past maxCalls the error goes to the caller', async () => {
    const eventId = randomUUID();
    remote.failNext(503, 2);
    const outcome = await sms(eventId);
    assert.equal(outcome.status, 'completed');
    assert.equal(outcome.attempts, 3);
    assert.deepEqual(remote.calls, [outcome.key, outcome.key, outcome.key]);
    assert.equal(remote.performed.length, 1);

    const other = randomUUID();
    remote.failNext(503, 2);
    await assert.rejects(sms(other, { maxCalls: 2 }), /remote unavailable \(HTTP 503\)/);
    const pending = await record(other);
    assert.equal(pending?.status, 'pending', 'kept pending for the next delivery');
    assert.equal(pending?.attempts, 2);
    assert.equal(pending?.error, 'Error');
    const next = await sms(other);
    assert.equal(next.status, 'completed');
    assert.equal(next.attempts, 3, 'the attempts count over runs');
  });

  it('a call that outlives timeoutMs is aborted and retried with the same key', async () => {
    const eventId = randomUUID();
    const keys: string[] = [];
    const outcome = await sms(eventId, {
      timeoutMs: 50,
      call: async (key, signal) => {
        keys.push(key);
        // The first call ignores its signal and never answers; the timeout ends it all the same.
        if (keys.length === 1) return new Promise<never>(() => undefined);
        return sendMessage(remote.url, key, signal);
      },
    });
    assert.equal(outcome.status, 'completed');
    assert.deepEqual(keys, [outcome.key, outcome.key]);
    assert.equal((await record(eventId))?.attempts, 2);
  });
});

describe('next-hop events end to end', () => {
  it("a handler's next-hop event reaches the effect handler; its redelivery calls nobody", () =>
    withInProcessFixture('cvt_effects_ip', async ({ db: ip, exchange, startConsumer, startRelay }) => {
      let effectRuns = 0;
      const outcomes: { calledNow: boolean; attempt: number }[] = [];
      const orders = startConsumer({
        queue: `${exchange}.orders`,
        bindings: ['order.#'],
        queueType: 'classic',
        handlers: {
          OrderPlaced: async (event, { tx, schema }) => {
            // The next-hop event commits with this handler's transaction, or not at all.
            await appendToOutbox(
              tx,
              {
                aggregateType: 'sms',
                aggregateId: event.aggregateId,
                aggregateVersion: 1,
                eventType: 'SmsRequested',
                payload: { template: 'order-placed' },
              },
              { schema },
            );
          },
        },
      });
      const texts = startConsumer({
        queue: `${exchange}.sms`,
        bindings: ['sms.#'],
        queueType: 'classic',
        backoff: { initialDelayMs: 20, maxDelayMs: 50, factor: 2 },
        handlers: {
          SmsRequested: async (event, { schema, attempt }) => {
            effectRuns++;
            const outcome = await performEffect(ip.pool, {
              schema,
              event,
              effect: 'send-sms',
              call: (key, signal) => sendMessage(remote.url, key, signal),
            });
            outcomes.push({ calledNow: outcome.calledNow, attempt });
            // Dies after the effect and before the commit on its first attempt: the delivery comes again.
            if (attempt === 1) throw new Error('handler crashed after the effect');
          },
        },
      });
      const relay = startRelay();
      await Promise.all([orders.ready({ timeoutMs: 10_000 }), texts.ready({ timeoutMs: 10_000 }), relay.ready()]);
      await appendToOutbox(
        ip.pool,
        { aggregateType: 'order', aggregateId: 'o1', aggregateVersion: 1, eventType: 'OrderPlaced', payload: {} },
        { schema: ip.schema },
      );
      await waitFor(() => outcomes.length === 2, 'the effect handler run twice');
      assert.deepEqual(outcomes, [
        { calledNow: true, attempt: 1 },
        { calledNow: false, attempt: 2 },
      ]);
      assert.equal(effectRuns, 2);
      assert.equal(remote.calls.length, 1, 'the redelivery did not call the remote');
      assert.equal(remote.performed.length, 1);
      const { rows } = await ip.pool.query(`SELECT status, attempts FROM "${ip.schema}".effects`);
      assert.deepEqual(rows, [{ status: 'completed', attempts: 1 }]);
    }));
});
