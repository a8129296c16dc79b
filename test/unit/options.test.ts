import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/runtime/errors.js';
import { closest, editDistance, optionDefault } from '../../src/runtime/options.js';
import { resolveRelayOptions, relayOptions } from '../../src/relay/options.js';
import { resolveConsumerOptions, resolveProcessorOptions } from '../../src/inbox/options.js';
import { MAX_ATTEMPT } from '../../src/inbox/headers.js';
import { relayFlagDefaults } from '../../src/cli/env.js';
import { migrate } from '../../src/schema/migrate.js';
import { serveConsumerMetrics } from '../../src/metrics/metrics.js';
import { serveRelayMetrics } from '../../src/metrics/relay.js';
import { OPTIONS_DOC, optionsReferenceIsCurrent, renderOptionsReference } from '../../scripts/docs/options.js';

const handlers = { A: async () => undefined };
const connections = { connectionString: 'postgres://nobody@127.0.0.1:1/none', amqpUrl: 'amqp://nobody@127.0.0.1:1' };

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, 'CONVERGE_INVALID_CONFIG');
    return err;
  }
  assert.fail('expected a ConfigError');
}

describe('edit distance', () => {
  test('counts insertions, deletions and substitutions', () => {
    assert.equal(editDistance('', ''), 0);
    assert.equal(editDistance('prefetch', 'prefetch'), 0);
    assert.equal(editDistance('prefech', 'prefetch'), 1);
    assert.equal(editDistance('batchSzie', 'batchSize'), 2);
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(editDistance('abc', ''), 3);
  });

  test('suggests the nearest known name only when it is a plausible typo', () => {
    assert.equal(closest('prefech', ['prefetch', 'batchSize', 'queue']), 'prefetch');
    assert.equal(closest('batchSzie', ['prefetch', 'batchSize']), 'batchSize');
    assert.equal(closest('completelyDifferent', ['prefetch', 'batchSize']), undefined);
  });
});

describe('option validation', () => {
  test('an unknown key is rejected, named, with the closest known key suggested', () => {
    const err = configError(() =>
      resolveConsumerOptions({ ...connections, queue: 'q', handlers, prefech: 10 } as never),
    );
    assert.equal(err.field, 'prefech');
    assert.match(err.message, /unknown option 'prefech' \(did you mean 'prefetch'\?\)/);
    const nested = configError(() => resolveRelayOptions({ ...connections, backoff: { factr: 2 } } as never));
    assert.equal(nested.field, 'backoff.factr');
    assert.match(nested.message, /did you mean 'factor'/);
  });

  test('maxAttempts above the highest attempt a header can carry is rejected, naming the field', () => {
    const err = configError(() =>
      resolveConsumerOptions({ ...connections, queue: 'q', handlers, maxAttempts: MAX_ATTEMPT + 1 }),
    );
    assert.equal(err.field, 'maxAttempts');
    assert.equal(
      resolveConsumerOptions({ ...connections, queue: 'q', handlers, maxAttempts: MAX_ATTEMPT }).maxAttempts,
      MAX_ATTEMPT,
    );
  });

  test('every problem is reported at once', () => {
    const err = configError(() =>
      resolveRelayOptions({ batchSzie: 10, leaseMs: 1, routingKey: '{nope}', backoff: { factor: 0.5 } } as never),
    );
    const paths = err.problems.map((p) => p.path).sort();
    assert.deepEqual(paths, ['amqpUrl', 'backoff.factor', 'batchSzie', 'connectionString', 'leaseMs', 'routingKey']);
    for (const path of paths) assert.ok(err.message.includes(`"${path}"`), `message lists ${path}: ${err.message}`);
    assert.equal(err.field, err.problems[0]!.path);
  });

  test('a missing connection is a ConfigError naming the field; the library reads no environment', () => {
    const saved = { db: process.env.DATABASE_URL, amqp: process.env.AMQP_URL };
    process.env.DATABASE_URL = 'postgres://from-env@127.0.0.1:1/x';
    process.env.AMQP_URL = 'amqp://from-env@127.0.0.1:1';
    try {
      assert.equal(configError(() => resolveRelayOptions({ amqpUrl: connections.amqpUrl })).field, 'connectionString');
      assert.equal(
        configError(() => resolveRelayOptions({ connectionString: connections.connectionString })).field,
        'amqpUrl',
      );
      assert.equal(
        configError(() => resolveConsumerOptions({ queue: 'q', handlers, amqpUrl: connections.amqpUrl })).field,
        'connectionString',
      );
      assert.equal(
        configError(() =>
          resolveConsumerOptions({ queue: 'q', handlers, connectionString: connections.connectionString }),
        ).field,
        'amqpUrl',
      );
      assert.equal(configError(() => resolveProcessorOptions({ consumer: 'c', handlers })).field, 'connectionString');
    } finally {
      if (saved.db === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved.db;
      if (saved.amqp === undefined) delete process.env.AMQP_URL;
      else process.env.AMQP_URL = saved.amqp;
    }
  });

  test('poolMode transaction: claim exclusive needs directConnectionString; lease and the consumer do not', () => {
    const pooled = { ...connections, poolMode: 'transaction' as const };
    const refused = configError(() => resolveRelayOptions({ ...pooled, claim: 'exclusive' }));
    assert.equal(refused.field, 'claim');
    assert.match(refused.message, /directConnectionString/);
    const direct = 'postgres://direct@127.0.0.1:5432/x';
    assert.equal(
      resolveRelayOptions({ ...pooled, claim: 'exclusive', directConnectionString: direct }).directConnectionString,
      direct,
    );
    assert.equal(resolveRelayOptions(pooled).poolMode, 'transaction');
    assert.equal(resolveRelayOptions(connections).poolMode, 'session');
    assert.equal(resolveConsumerOptions({ ...pooled, queue: 'q', handlers }).poolMode, 'transaction');
    assert.equal(
      configError(() => resolveRelayOptions({ ...connections, poolMode: 'statement' as never })).field,
      'poolMode',
    );
  });

  test('migrate needs a pool or a connection string', async () => {
    await assert.rejects(
      migrate(undefined as never),
      (err: unknown) => err instanceof ConfigError && err.field === 'target',
    );
  });

  test('pool, logger and hooks are checked by shape, not accepted as anything', () => {
    assert.equal(configError(() => resolveRelayOptions({ ...connections, pool: {} as never })).field, 'pool');
    assert.equal(
      configError(() => resolveRelayOptions({ ...connections, logger: { info() {} } as never })).field,
      'logger',
    );
    assert.equal(
      configError(() => resolveRelayOptions({ ...connections, hooks: { afterConfirm: 'no' } as never })).field,
      'hooks.afterConfirm',
    );
    assert.equal(
      configError(() => resolveConsumerOptions({ ...connections, queue: 'q', handlers: { A: 'no' } as never })).field,
      'handlers.A',
    );
  });

  test('resolved consumer options keep their shapes and serve the processor as they are', () => {
    const resolved = resolveConsumerOptions({
      ...connections,
      queue: 'orders',
      handlers,
      rampUp: false,
      reorderBuffer: { maxTotal: 5 },
      backoff: { maxDelayMs: 50 },
    });
    assert.equal(resolved.consumer, 'orders');
    assert.equal(resolved.retryQueue, 'orders.retry');
    assert.equal(resolved.rampUp, null);
    assert.deepEqual(resolved.reorderBuffer, { maxPerAggregate: 1_000, maxTotal: 5 });
    assert.deepEqual(resolved.backoff, { initialDelayMs: 100, maxDelayMs: 50, factor: 2 });
    assert.equal(resolveProcessorOptions(resolved), resolved);
    const relay = resolveRelayOptions(connections);
    assert.equal(typeof relay.routingKey, 'function');
    assert.equal(relay.batchSize, 500);
  });

  test('rejects a bad metrics endpoint, naming the field', () => {
    const component = {} as never;
    assert.equal(configError(() => serveRelayMetrics(component, { port: 70_000 })).field, 'port');
    assert.equal(configError(() => serveConsumerMetrics(component, { port: 9464, host: '' })).field, 'host');
    assert.equal(configError(() => serveRelayMetrics(component, { port: 1.5, hots: 'x' } as never)).problems.length, 2);
  });
});

describe('CLI defaults', () => {
  test('the relay command takes its flag defaults from the relay option schema', () => {
    const schema = relayOptions.schema;
    assert.deepEqual(relayFlagDefaults, {
      exchange: optionDefault(schema, 'exchange'),
      routingKey: optionDefault(schema, 'routingKey'),
      batchSize: optionDefault(schema, 'batchSize'),
      claim: optionDefault(schema, 'claim'),
      leaseMs: optionDefault(schema, 'leaseMs'),
      pollIntervalMs: optionDefault(schema, 'pollIntervalMs'),
      maxAttempts: optionDefault(schema, 'maxAttempts'),
    });
    const resolved = resolveRelayOptions(connections);
    assert.equal(relayFlagDefaults.batchSize, resolved.batchSize);
    assert.equal(relayFlagDefaults.pollIntervalMs, resolved.pollIntervalMs);
    assert.equal(relayFlagDefaults.leaseMs, resolved.leaseMs);
    assert.equal(relayFlagDefaults.claim, resolved.claim);
    assert.equal(relayFlagDefaults.maxAttempts, resolved.maxAttempts);
    assert.equal(relayFlagDefaults.exchange, resolved.exchange);
  });
});

describe('generated options reference', () => {
  test('the committed reference is current', () => {
    assert.ok(optionsReferenceIsCurrent(), `${OPTIONS_DOC} is out of date; run npm run docs`);
    assert.equal(readFileSync(OPTIONS_DOC, 'utf8'), renderOptionsReference());
  });

  test('docs:check detects drift and names the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'converge-docs-'));
    const stale = join(dir, 'options.md');
    try {
      writeFileSync(stale, renderOptionsReference().replace('Rows claimed per cycle.', 'Rows per cycle.'));
      assert.equal(optionsReferenceIsCurrent(stale), false);
      const run = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'scripts/docs/options.ts', '--check', '--file', stale],
        { encoding: 'utf8' },
      );
      assert.equal(run.status, 1, run.stderr);
      assert.ok(run.stderr.includes(stale), run.stderr);
      writeFileSync(stale, renderOptionsReference());
      const current = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'scripts/docs/options.ts', '--check', '--file', stale],
        { encoding: 'utf8' },
      );
      assert.equal(current.status, 0, current.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
