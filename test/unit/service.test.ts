import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { Service, type ServiceSpec } from '../../src/runtime/service.js';
import { SchemaNotMigratedError } from '../../src/runtime/errors.js';
import type { Logger } from '../../src/runtime/logger.js';

/** A logger that keeps the messages, so a test can see what each failure logged. */
function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const log = (_fields: unknown, message?: string) => void lines.push(message ?? '');
  return { lines, debug: log, info: log, warn: log, error: log };
}

function service(overrides: Partial<ServiceSpec> = {}) {
  const calls = { close: 0, interrupt: 0 };
  const logger = recordingLogger();
  const emitter = new EventEmitter();
  const spec: ServiceSpec = {
    component: 'engine e1',
    what: 'engine step',
    logger,
    databaseTarget: () => ({ endpoint: '127.0.0.1:5432', name: 'test' }),
    // 1 ms apart: the loop waits, but no test waits on a clock.
    reconnectBackoff: { initialDelayMs: 1, maxDelayMs: 1, factor: 1 },
    handleSignals: false,
    emitter,
    interrupt: () => void calls.interrupt++,
    close: async () => void calls.close++,
    ...overrides,
  };
  return { service: new Service(spec), calls, logger, emitter };
}

const notMigrated = () => new SchemaNotMigratedError('converge', '127.0.0.1:5432', 0, 18);

test('start runs one loop however often it is called; stop ends it after the step in progress and closes once', async () => {
  const { service: shell, calls } = service();
  let steps = 0;
  let release!: () => void;
  const inStep = new Promise<void>((resolve) => (release = resolve));
  const step = async (succeeded: () => void) => {
    steps++;
    succeeded();
    await inStep;
  };
  shell.start(step);
  shell.start(step);
  assert.equal(steps, 1);
  const stopped = shell.stop();
  assert.equal(shell.stop(), stopped, 'every stop() returns the same promise');
  assert.equal(calls.interrupt, 1);
  assert.equal(calls.close, 0, 'the engine is closed only after the step in progress ended');
  release();
  await stopped;
  assert.equal(steps, 1);
  assert.equal(calls.close, 1);
  assert.equal(shell.failure, undefined);
});

test('a failed step is logged, emitted to error listeners and retried; the count starts again after a success', async () => {
  // Jittered between half and all of 2, 8, 32 ms: the second delay is at least 4 ms, a first at most 2.
  const {
    service: shell,
    logger,
    emitter,
  } = service({
    reconnectBackoff: { initialDelayMs: 2, maxDelayMs: 64, factor: 4 },
  });
  const errors: unknown[] = [];
  emitter.on('error', (err) => errors.push(err));
  const attempts: number[] = [];
  const judgedAttempts: boolean[] = [];
  let failures = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  // Fails twice, succeeds once, fails once more, then waits for stop().
  const plan = ['fail', 'fail', 'ok', 'fail', 'hold'];
  shell.start(
    async (succeeded) => {
      const next = plan.shift();
      if (next === 'hold') return done();
      if (next === 'ok') return succeeded();
      failures++;
      throw new Error(`boom ${failures}`);
    },
    { onFailure: (judged) => void judgedAttempts.push(judged.fatal === undefined) },
  );
  await finished;
  for (const line of logger.lines) {
    const match = /^engine step failed; retrying in (\d+) ms$/.exec(line);
    if (match) attempts.push(Number(match[1]));
  }
  await shell.stop();
  assert.equal(errors.length, 3, 'each failure reaches the error listeners');
  assert.deepEqual(judgedAttempts, [true, true, true]);
  assert.equal(attempts.length, 3);
  assert.ok(attempts[0]! <= 2 && attempts[1]! >= 4, `the backoff grows: ${attempts.join(', ')}`);
  assert.ok(attempts[2]! <= 2, `a success starts it from the floor again: ${attempts.join(', ')}`);
  assert.equal(shell.failure, undefined);
});

test('a permanent misconfiguration before ready rejects ready(), stops the loop and closes the engine', async () => {
  const { service: shell, calls } = service();
  let steps = 0;
  let ended!: () => void;
  const afterLoop = new Promise<void>((resolve) => (ended = resolve));
  shell.start(
    async () => {
      steps++;
      throw notMigrated();
    },
    { afterLoop: async () => ended() },
  );
  await assert.rejects(shell.readiness.wait(), SchemaNotMigratedError);
  await afterLoop;
  await shell.stop();
  assert.equal(steps, 1, 'no retry after a fatal failure');
  assert.ok(shell.failure instanceof SchemaNotMigratedError);
  assert.equal(shell.stopping, true);
  assert.equal(calls.close, 1);
});

test('the same failure once the engine was ready is retried, not fatal', async () => {
  const { service: shell } = service();
  shell.readiness.resolve();
  let steps = 0;
  let retried!: () => void;
  const twice = new Promise<void>((resolve) => (retried = resolve));
  shell.start(async () => {
    if (++steps === 2) return retried();
    if (steps > 2) return shell.idle.sleep(60_000);
    throw notMigrated();
  });
  await twice;
  await shell.stop();
  assert.equal(shell.failure, undefined);
});

test('handleSignals adds SIGTERM and SIGINT handlers for the loop and removes them on stop', async () => {
  const before = process.listenerCount('SIGTERM');
  const { service: shell } = service({ handleSignals: true });
  shell.start(() => shell.idle.sleep(60_000));
  assert.equal(process.listenerCount('SIGTERM'), before + 1);
  await shell.stop();
  assert.equal(process.listenerCount('SIGTERM'), before);
});
