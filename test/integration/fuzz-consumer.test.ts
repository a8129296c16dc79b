/**
 * The consumer against hostile AMQP input (issue 26): fast-check generates basic properties,
 * header tables and bodies (test/support/hostile-messages.ts), publishes each raw to one consumer
 * on the real broker, and checks that every message ends in exactly one outcome (applied, or
 * quarantined with a reason), with no crash, no unhandled rejection, no reconnect, and no
 * payload or header value in a log line (test/support/fuzz-rig.ts).
 *
 * CI runs a fixed seed. A long run by hand: `FUZZ_RUNS=2000 FUZZ_SEED=7 npm run fuzz`; the seed
 * and a summary are printed, and a failing case prints its seed and path for fast-check to replay
 * (`FUZZ_SEED=<seed> FUZZ_PATH=<path>`, with FUZZ_SHRINK=1 to minimise it). Named cases below pin the defects the issue lists.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { replayQuarantined } from '../../src/ops/replay.js';
import { withEnv, type Env } from '../support/consumer-env.js';
import { FuzzRun, MAX_ATTEMPTS, formatSummary } from '../support/fuzz-rig.js';
import {
  EVENT_ID,
  SECRET_MARK,
  hostileCase,
  type Entry,
  type FieldValue,
  type HostileCase,
  type HostileProperties,
} from '../support/hostile-messages.js';
import { long } from '../support/hostile-headers.js';
import { nestedTable } from '../support/raw-amqp.js';
import { describe, test, waitFor } from '../support/rig.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20261205);
const PATH = process.env.FUZZ_PATH;

describe('consumer fuzzer', () => {
  test(`${RUNS} hostile messages (seed ${SEED}): one outcome each, no crash, no reconnect, nothing in the logs`, async () => {
    await withEnv(async (env) => {
      const run = new FuzzRun(env, SEED.toString(36));
      try {
        await run.start();
        await fc.assert(
          fc.asyncProperty(hostileCase, async (c) => {
            await run.run(c);
          }),
          // Shrinking replays cases on the live consumer, a stuck one costing a timeout each: by hand only (FUZZ_SHRINK=1).
          { seed: SEED, numRuns: RUNS, path: PATH, endOnFailure: process.env.FUZZ_SHRINK !== '1' },
        );
        run.checkHealth();
      } catch (err) {
        // fast-check keeps the failing assertion as the cause, which the test runner does not print.
        if (err instanceof Error && err.cause !== undefined) console.log('fuzz case failed:', err.cause);
        console.log(run.logger.records.slice(-10).join('\n'));
        throw err;
      } finally {
        console.log(formatSummary(SEED, run.summary));
        await run.close();
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'nothing left in the queue');
    }, 'cvfuzz');
  });
});

// ---------------------------------------------------------------------------------------------
// Named cases: the defects of issue 26, each as the fuzzer would send it.
// ---------------------------------------------------------------------------------------------

const name = (key: string | Buffer) => (Buffer.isBuffer(key) ? key : Buffer.from(key));

/** A valid AmountAdded event under `headers`, whose handler fails `failTimes` times first. */
function validCase(headers: Entry[], failTimes = 0): HostileCase {
  return {
    properties: { messageId: EVENT_ID, contentType: 'application/json', deliveryMode: 2 },
    headers,
    body: {
      kind: 'valid',
      envelope: {
        eventType: 'AmountAdded',
        aggregateType: 'order',
        aggregateVersion: 1,
        kind: 'incremental',
        payload: { delta: 1, failTimes, secret: `${SECRET_MARK}-named`, extra: null },
        occurredAt: new Date().toISOString(),
      },
    },
  };
}

/** One consumer for a named case, its health checked at the end, everything removed even on failure. */
function withRun(work: (run: FuzzRun, env: Env) => Promise<void>): Promise<void> {
  return withEnv(async (env) => {
    const run = new FuzzRun(env, 'named');
    try {
      await run.start();
      await work(run, env);
      run.checkHealth();
    } finally {
      await run.close();
    }
  }, 'cvfuzz');
}

async function replayOutcome(env: Env, id: string): Promise<string | null> {
  const { rows } = await env.pool.query<{ replay_outcome: string | null }>(
    `SELECT replay_outcome FROM "${env.schema}".quarantine WHERE id = $1`,
    [id],
  );
  return rows[0]!.replay_outcome;
}

/** Replays quarantine row `id` to the run's queue and waits for the outcome recorded on it. */
async function replay(env: Env, id: string, expected: string): Promise<void> {
  await replayQuarantined(env.pool, env.publisher, { id, queue: env.queue, schema: env.schema });
  await waitFor(
    async () => (await replayOutcome(env, id)) === expected,
    `the replay of row ${id} recorded as ${expected}`,
  );
}

describe('consumer fuzzer: named cases (issue 26)', () => {
  test('defect 2: a header table nested 4,000 levels is quarantined, the event behind it applies, no reconnect', () =>
    withRun(async (run) => {
      const deep: FieldValue = { t: 'raw', v: Buffer.concat([Buffer.from('F'), long(nestedTable(4_000))]) };
      assert.equal((await run.run(validCase([[name('deep'), deep]]))).outcome, 'quarantined:undecodable-headers');
      assert.equal((await run.run(validCase([]))).outcome, 'applied');
    }));

  for (const [label, forged] of [
    ['2147483647 (int32)', { t: 'I', v: 2147483647 }],
    ['2^53 (int64)', { t: 'l', v: 2n ** 53n }],
    ['10^9 (int64)', { t: 'l', v: 10n ** 9n }],
    ['10^9 (text)', { t: 'S', v: Buffer.from('1000000000') }],
  ] as const) {
    test(`defect 3: x-converge-attempt = ${label} on a failing handler: every retry, then quarantined with a reason`, () =>
      withRun(async (run) => {
        const failing = await run.run(validCase([[name('x-converge-attempt'), forged]], 99));
        assert.equal(failing.outcome, 'quarantined:handler-failed');
        assert.equal(run.handler.calls.get(failing.eventId), MAX_ATTEMPTS, 'the forged count skipped no attempt');
        const once = await run.run(validCase([[name('x-converge-attempt'), forged]], 1));
        assert.equal(once.outcome, 'applied', 'a handler that fails once gets its retry');
        assert.equal(run.handler.calls.get(once.eventId), 2);
      }));
  }

  test('defect 4: a forged x-converge-replay-of records nothing on a row never replayed; the real replay is recorded', () =>
    withRun(async (run, env) => {
      const invalid: HostileCase = { ...validCase([]), body: { kind: 'json', value: 'not an envelope' } };
      const quarantined = await run.run(invalid);
      assert.equal(quarantined.outcome, 'quarantined:malformed-body');
      const id = quarantined.quarantineId!;
      for (const forged of [
        { t: 'S', v: Buffer.from(id) },
        { t: 'l', v: BigInt(id) },
      ] as const)
        assert.equal((await run.run(validCase([[name('x-converge-replay-of'), forged]]))).outcome, 'applied');
      assert.equal(await replayOutcome(env, id), null, 'no replay outcome on a row nobody replayed');
      await replay(env, id, 'quarantined');
    }));

  // Values amqplib decodes into numbers or keys its own encoder refuses (RabbitMQ refuses NaN and ±Infinity itself).
  const unencodable: [string, Entry][] = [
    ['double -1e19 (no int64)', [name('d'), { t: 'd', v: -1e19 }]],
    ['timestamp 2^64-1', [name('ts'), { t: 'T', v: 2n ** 64n - 1n }]],
    ['array holding double -1e19', [name('a'), { t: 'A', v: [{ t: 'd', v: -1e19 }] }]],
    ['key of 255 invalid UTF-8 bytes (765 once decoded)', [Buffer.alloc(255, 0xff), { t: 'V' }]],
  ];
  for (const [label, entry] of unencodable) {
    test(`defect e: ${label} goes through every retry tier trip into quarantine, and a replay applies it`, () =>
      withRun(async (run, env) => {
        const result = await run.run(validCase([entry], MAX_ATTEMPTS));
        assert.equal(result.outcome, 'quarantined:handler-failed');
        assert.equal(run.handler.calls.get(result.eventId), MAX_ATTEMPTS, 'each attempt came back from a retry tier');
        await replay(env, result.quarantineId!, 'applied');
        assert.equal(
          await env.count('SELECT count(*) AS n FROM $schema.applied WHERE event_id = $1', [result.eventId]),
          1,
        );
      }));
  }

  for (const [label, value] of [
    ['bytes', { t: 'x', v: Buffer.from('proto') }],
    [
      'a nested table forging x-converge-attempt',
      { t: 'F', v: [[name('x-converge-attempt'), { t: 'l', v: 10n ** 9n }]] },
    ],
  ] as const) {
    test(`defect f: a __proto__ header key holding ${label} ends in one outcome, forging nothing`, () =>
      withRun(async (run) => {
        const result = await run.run(validCase([[name('__proto__'), value as FieldValue]], MAX_ATTEMPTS));
        const calls = run.handler.calls.get(result.eventId) ?? 0;
        assert.ok(
          result.outcome === 'quarantined:undecodable-headers' ||
            (result.outcome === 'quarantined:handler-failed' && calls === MAX_ATTEMPTS),
          `${result.outcome} after ${calls} handler calls`,
        );
        // Quarantined at first sight, the delivery's headers are stored as they came, `__proto__` included.
        const invalid: HostileCase = {
          ...validCase([[name('__proto__'), value as FieldValue]]),
          body: { kind: 'json', value: null },
        };
        assert.match((await run.run(invalid)).outcome, /^quarantined:/);
      }));
  }
});

// Defect g: basic properties amqplib decodes into values its own encoder refuses, so no retry copy of
// the message could be published and a failing handler retried it for ever (attempt 1 each time).
describe('consumer fuzzer: named cases (issue 26, defect g)', () => {
  const invalidUtf8 = Buffer.alloc(255, 0xff); // 765 bytes once decoded (U+FFFD each)
  const cases: [string, HostileProperties][] = [
    ['timestamp 2^64 - 1', { timestamp: 2n ** 64n - 1n }],
    ['messageId of 255 invalid UTF-8 bytes', { messageId: invalidUtf8 }],
    ...(['type', 'correlationId', 'replyTo', 'contentType', 'contentEncoding', 'appId'] as const).map(
      (field): [string, HostileProperties] => [`${field} of 255 invalid UTF-8 bytes`, { [field]: invalidUtf8 }],
    ),
  ];
  for (const [label, properties] of cases) {
    test(`defect g: ${label}: a failing handler's attempts are counted through the retry tiers into quarantine; a replay applies it`, () =>
      withRun(async (run, env) => {
        const failing = validCase([], MAX_ATTEMPTS);
        const result = await run.run({ ...failing, properties: { ...failing.properties, ...properties } });
        assert.equal(result.outcome, 'quarantined:handler-failed');
        assert.equal(run.handler.calls.get(result.eventId), MAX_ATTEMPTS, 'each attempt came back from a retry tier');
        const untrusted = run.settled.filter((s) => s.untrustedHeaders?.length);
        assert.deepEqual(untrusted, [], "every copy's converge headers were verified");
        const { rows } = await env.pool.query<{ attempts: number; omitted: unknown }>(
          `SELECT attempts, properties->'headers'->'x-converge-properties-omitted' AS omitted
             FROM "${env.schema}".quarantine WHERE id = $1`,
          [result.quarantineId],
        );
        assert.deepEqual(rows[0], { attempts: MAX_ATTEMPTS, omitted: Object.keys(properties) });
        await replay(env, result.quarantineId!, 'applied');
        // Settled (reported) after its commit: the next case must not take the replay's outcome for its own.
        await waitFor(
          () => run.settled.some((s) => s.action === 'ack' && s.outcome === 'applied' && s.eventId === result.eventId),
          'the replay settled',
        );
        const once = validCase([], 1);
        const retried = await run.run({ ...once, properties: { ...once.properties, ...properties } });
        assert.equal(retried.outcome, 'applied', 'a handler that fails once gets its retry');
        assert.equal(run.handler.calls.get(retried.eventId), 2);
      }));
  }
});
