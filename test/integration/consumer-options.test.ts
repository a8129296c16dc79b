/**
 * Consumer option validation: ConfigError naming the field before anything connects.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import { silentLogger, startConsumer, type ConsumerOptions } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { describe, test } from '../support/rig.js';

describe('consumer options', () => {
  test('invalid options throw ConfigError naming the field, before anything connects', () => {
    const handlers = { AmountAdded: async () => undefined };
    const cases: [string, unknown][] = [
      ['handlers', { queue: 'orders' }],
      ['handlers', { queue: 'orders', handlers: {} }],
      ['queue', { queue: '', handlers }],
      ['queue', { queue: 'has space', handlers }],
      ['prefetch', { queue: 'orders', handlers, prefetch: 0 }],
      ['prefetch', { queue: 'orders', handlers, prefetch: 1.5 }],
      ['schema', { queue: 'orders', handlers, schema: 'Bad-Schema' }],
      ['maxAttempts', { queue: 'orders', handlers, maxAttempts: 0 }],
    ];
    for (const [field, options] of cases) {
      assert.throws(
        () => startConsumer({ logger: silentLogger, ...(options as ConsumerOptions) }),
        (err: unknown) => {
          assert.ok(
            err instanceof ConfigError,
            `expected ConfigError for ${JSON.stringify(options)}, got ${String(err)}`,
          );
          assert.equal(err.field, field);
          assert.equal(err.code, 'CONVERGE_INVALID_CONFIG');
          assert.match(err.message, new RegExp(`"${field}"`));
          return true;
        },
      );
    }
  });
});
