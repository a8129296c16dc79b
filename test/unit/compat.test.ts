import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCompatGuard, type Executor } from '../../src/index.js';
import { ConfigError, IncompatibleSchemaVersionError } from '../../src/errors.js';
import { acceptedVersions, acceptsVersion, formatAccepts, parseAccepts } from '../../src/inbox/index.js';
import { createProgram } from '../../src/cli/program.js';
import { judgeCompat, type RegistryEntry } from '../../src/ops/index.js';

const handler = () => undefined;
const up = (p: unknown) => p;

describe('acceptedVersions', () => {
  it('a type with its own handler and no schemas entry reads version 1 only', () => {
    const accepted = acceptedVersions({ handlers: { OrderPaid: handler }, schemas: {} });
    assert.equal(formatAccepts(accepted), 'OrderPaid:1');
    assert.equal(acceptsVersion(accepted, 'OrderPaid', 1), 'yes');
    assert.equal(acceptsVersion(accepted, 'OrderPaid', 2), 'no');
    assert.equal(acceptsVersion(accepted, 'OrderShipped', 7), 'not-consumer');
  });

  it('a schemas entry reads current and every older version with an unbroken upcaster chain', () => {
    const accepted = acceptedVersions({
      handlers: { OrderPaid: handler, OrderShipped: handler },
      // No upcaster from 2: versions 1 and 2 cannot reach 4, only 3 can.
      schemas: {
        OrderPaid: { current: 2, upcasters: { 1: up } },
        OrderShipped: { current: 4, upcasters: { 1: up, 3: up } },
      },
    });
    assert.equal(formatAccepts(accepted), 'OrderPaid:1-2,OrderShipped:3-4');
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((v) => acceptsVersion(accepted, 'OrderShipped', v)),
      ['no', 'no', 'yes', 'yes', 'no'],
    );
  });

  it("a '*' handler or a batchHandler reads any version of every type not listed", () => {
    const star = acceptedVersions({ handlers: { '*': handler, OrderPaid: handler }, schemas: {} });
    assert.equal(formatAccepts(star), 'OrderPaid:1,*');
    assert.equal(acceptsVersion(star, 'Anything', 99), 'yes');
    assert.equal(acceptsVersion(star, 'OrderPaid', 2), 'no', 'its own handler still takes version 1 only');
    const batch = acceptedVersions({ handlers: {}, batchHandler: handler, schemas: { OrderPaid: { current: 3 } } });
    assert.equal(formatAccepts(batch), 'OrderPaid:3,*');
  });

  it('a schemas entry for a type nothing handles is not recorded', () => {
    const accepted = acceptedVersions({ handlers: { OrderPaid: handler }, schemas: { Unhandled: { current: 2 } } });
    assert.equal(formatAccepts(accepted), 'OrderPaid:1');
  });
});

describe('parseAccepts', () => {
  it('reads what formatAccepts writes, and hand-written lists with repeated types', () => {
    for (const spec of ['OrderPaid:1-2,OrderShipped:1', 'A:1,*', 'A:1;3-4'])
      assert.equal(formatAccepts(parseAccepts(spec)), spec);
    const repeated = parseAccepts(' OrderPaid:1 , OrderPaid:3-4 ');
    assert.deepEqual(repeated.types.OrderPaid, [
      { min: 1, max: 1 },
      { min: 3, max: 4 },
    ]);
    assert.equal(acceptsVersion(repeated, 'OrderPaid', 2), 'no');
  });

  it('a bad spec is a ConfigError naming the field', () => {
    for (const spec of ['', 'OrderPaid', 'OrderPaid:0', 'OrderPaid:3-1', 'OrderPaid:x', ':1', 'A:1-']) {
      assert.throws(
        () => parseAccepts(spec, '--accepts'),
        (err: unknown) => err instanceof ConfigError && err.field === '--accepts',
        spec,
      );
    }
  });
});

const at = (secondsAgo: number) => new Date(Date.now() - secondsAgo * 1000);

/** A registry row: running by default; `stopped` or `lost` seen `secondsAgo`, live or not. */
const entry = (
  consumer: string,
  accepts: string,
  state: 'running' | 'stopped' | 'lost' = 'running',
  options: { secondsAgo?: number; live?: boolean } = {},
): RegistryEntry => ({
  consumer,
  instance: `${consumer}-${accepts}-${state}`,
  queue: consumer,
  accepts,
  startedAt: at(3600),
  lastSeenAt: at(options.secondsAgo ?? 10),
  stoppedAt: state === 'stopped' ? at(options.secondsAgo ?? 10) : null,
  running: state === 'running',
  live: options.live ?? true,
});

describe('judgeCompat', () => {
  it('compatible only when every counted consumer of the type reads the version; other types and stale ones do not count', () => {
    const entries = [
      entry('billing', 'OrderPaid:1-2'),
      entry('search', 'OrderPaid:1-3'),
      entry('audit', '*'),
      entry('shipping', 'OrderShipped:1'),
      entry('gone', 'OrderPaid:1', 'stopped', { secondsAgo: 90_000, live: false }),
    ];
    const v3 = judgeCompat(entries, 'OrderPaid', 3);
    assert.equal(v3.compatible, false);
    assert.deepEqual(
      v3.consumers.map((c) => [c.consumer, c.reads]),
      [
        ['billing', false],
        ['search', true],
        ['audit', true],
      ],
    );
    assert.deepEqual(
      v3.stale.map((c) => c.consumer),
      ['gone'],
    );
    assert.equal(judgeCompat(entries, 'OrderPaid', 2).compatible, true, 'the stale v1-only consumer is ignored');
    assert.equal(judgeCompat(entries, 'Unknown', 5).compatible, true);
  });

  it('during a rolling deploy the running old and new instances must both read the version', () => {
    const entries = [entry('billing', 'OrderPaid:1-3'), entry('billing', 'OrderPaid:1-2')];
    assert.equal(judgeCompat(entries, 'OrderPaid', 3).compatible, false);
  });

  it('once the new code runs, stopped or lost rows of the old code no longer count', () => {
    for (const state of ['stopped', 'lost'] as const) {
      const entries = [entry('billing', 'OrderPaid:1-3'), entry('billing', 'OrderPaid:1-2', state, { secondsAgo: 5 })];
      assert.equal(judgeCompat(entries, 'OrderPaid', 3).compatible, true, state);
    }
  });

  it('a consumer with no running instance counts by its newest row while that is live', () => {
    const down = [
      entry('billing', 'OrderPaid:1', 'stopped', { secondsAgo: 7200 }),
      entry('billing', 'OrderPaid:1-2', 'stopped', { secondsAgo: 600 }),
    ];
    const verdict = judgeCompat(down, 'OrderPaid', 3);
    assert.equal(verdict.compatible, false);
    assert.deepEqual(
      verdict.consumers.map((c) => c.accepts),
      ['OrderPaid:1-2'],
    );
    assert.equal(judgeCompat(down, 'OrderPaid', 2).compatible, true, 'the older row does not speak for it');
  });
});

/** An executor answering the registry read with `rows`, counting the statements it ran. */
function fakeRegistry(rows: () => Record<string, unknown>[]): Executor & { statements: number } {
  return {
    statements: 0,
    async query<R>(text: string) {
      this.statements++;
      assert.match(text, /consumer_schemas/);
      return { rows: rows() as R[], rowCount: rows().length };
    },
  };
}

const row = (consumer: string, accepts: string) => ({
  consumer,
  instance: 'host:1:abc',
  queue: consumer,
  accepts,
  started_at: new Date(),
  last_seen_at: new Date(),
  stopped_at: null,
  running: true,
  live: true,
});

describe('createCompatGuard', () => {
  it('refuses a version a live consumer does not read with a typed error naming it', async () => {
    const executor = fakeRegistry(() => [row('billing', 'OrderPaid:1-2'), row('search', 'OrderPaid:1-3')]);
    const guard = createCompatGuard({ cacheTtlMs: 60_000 });
    await guard.check(executor, { eventType: 'OrderPaid', schemaVersion: 2 });
    await guard.check(executor, [{ eventType: 'OrderPaid' }, { eventType: 'Other', schemaVersion: 9 }]);
    await assert.rejects(guard.check(executor, { eventType: 'OrderPaid', schemaVersion: 3 }), (err: unknown) => {
      assert.ok(err instanceof IncompatibleSchemaVersionError);
      assert.equal(err.code, 'CONVERGE_INCOMPATIBLE_SCHEMA_VERSION');
      assert.deepEqual(err.consumers, ['billing']);
      return true;
    });
    assert.equal(executor.statements, 1, 'one registry read serves every check within the TTL');
  });

  it('reads the registry again once the TTL has passed (0: on every check)', async () => {
    let accepts = 'OrderPaid:1-2';
    const executor = fakeRegistry(() => [row('billing', accepts)]);
    const guard = createCompatGuard({ cacheTtlMs: 0 });
    await assert.rejects(guard.check(executor, { eventType: 'OrderPaid', schemaVersion: 3 }));
    accepts = 'OrderPaid:1-3';
    await guard.check(executor, { eventType: 'OrderPaid', schemaVersion: 3 });
    assert.equal(executor.statements, 2);
  });

  it('rejects unknown options naming them', () => {
    assert.throws(
      () => createCompatGuard({ cacheTtl: 5 } as never),
      (err: unknown) => err instanceof ConfigError && err.field === 'cacheTtl',
    );
  });
});

describe('converge compat flags', () => {
  // Refused in the action before anything connects: the URL points nowhere on purpose.
  const compat = (...args: string[]) =>
    createProgram().parseAsync([
      'node',
      'converge',
      '--database-url',
      'postgres://nowhere.invalid/x',
      'compat',
      ...args,
    ]);

  it('a half-given or mixed mode is a ConfigError naming every bad flag', async () => {
    const cases: [string[], string[]][] = [
      [['--rollback', '--accepts', 'OrderPaid:1-2'], ['--consumer']],
      [['--rollback'], ['--accepts', '--consumer']],
      [['--event-type', 'OrderPaid'], ['--schema-version']],
      [['--schema-version', '3'], ['--event-type']],
      [
        ['--event-type', 'A', '--schema-version', '3', '--rollback', '--accepts', 'A:1', '--consumer', 'c'],
        ['--rollback'],
      ],
      [['--consumer', 'c'], ['--consumer']],
      [['--rollback', '--accepts', 'OrderPaid', '--consumer', 'c'], ['--accepts']],
    ];
    for (const [args, fields] of cases)
      await assert.rejects(compat(...args), (err: unknown) => {
        assert.ok(err instanceof ConfigError, `${args.join(' ')}: ${String(err)}`);
        assert.deepEqual(
          err.problems.map((p) => p.path),
          fields,
          args.join(' '),
        );
        return true;
      });
  });
});
