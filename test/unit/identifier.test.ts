import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isValidIdentifier, quoteIdentifier } from '../../src/runtime/identifier.js';
import { ConfigError, ConvergeError, InvalidIdentifierError } from '../../src/runtime/errors.js';
import { Consumer, Relay, appendToOutbox, migrate, silentLogger } from '../../src/index.js';
import { cleanup, readPipelineStatus } from '../../src/ops/index.js';

describe('quoteIdentifier', () => {
  for (const name of ['converge', 'outbox_2', '_private', 'a', 'x'.repeat(63)]) {
    it(`accepts ${name.length > 10 ? `a ${name.length}-character name` : name} and double-quotes it`, () => {
      assert.equal(quoteIdentifier(name), `"${name}"`);
      assert.equal(isValidIdentifier(name), true);
    });
  }

  const rejected: Array<[string, string]> = [
    ['a double quote', 'bad"name'],
    ['a quote-breaking injection', 'x"; DROP SCHEMA public CASCADE; --'],
    ['a single quote', "bad'name"],
    ['upper case', 'Converge'],
    ['a space', 'my schema'],
    ['a semicolon', 'a;b'],
    ['a dot', 'public.outbox'],
    ['a hyphen', 'my-schema'],
    ['a leading digit', '1schema'],
    ['non-ASCII letters', 'schéma'],
    ['the empty string', ''],
    ['64 characters', 'x'.repeat(64)],
    ['a trailing newline', 'converge\n'],
  ];
  for (const [label, name] of rejected) {
    it(`rejects ${label}`, () => {
      assert.equal(isValidIdentifier(name), false);
      assert.throws(
        () => quoteIdentifier(name),
        (err: unknown) => {
          assert.ok(err instanceof InvalidIdentifierError);
          assert.ok(err instanceof ConvergeError);
          assert.equal(err.code, 'CONVERGE_INVALID_IDENTIFIER');
          assert.equal(err.identifier, name);
          return true;
        },
      );
    });
  }
});

describe('a malicious schema name in configuration', () => {
  const evil = 'x"; DROP TABLE y; --';
  /** A pool stand-in that records any use: validation must fail before a connection is asked for. */
  const spyPool = () => {
    const used: string[] = [];
    const pool = {
      used,
      connect: async () => void used.push('connect'),
      query: async () => void used.push('query'),
      on: () => pool,
      end: async () => undefined,
    };
    return pool;
  };
  // Port 1: if anything did try to connect, it would fail with ECONNREFUSED instead of the expected error.
  const connectionString = 'postgres://postgres@127.0.0.1:1/test';
  const namesSchema = (err: unknown, expected: typeof ConfigError | typeof InvalidIdentifierError) => {
    assert.ok(err instanceof expected, `expected ${expected.name}, got ${String(err)}`);
    assert.equal(err.field, 'schema');
    assert.match((err as Error).message, /"schema"/);
    assert.ok(!(err as Error).message.includes('DROP'), 'the message does not echo the name');
    return true;
  };

  it('Relay throws ConfigError naming schema', () => {
    const pool = spyPool();
    assert.throws(
      () => new Relay({ schema: evil, pool: pool as never, logger: silentLogger }),
      (err) => namesSchema(err, ConfigError),
    );
    assert.deepEqual(pool.used, []);
  });

  it('Consumer throws ConfigError naming schema', () => {
    const pool = spyPool();
    assert.throws(
      () =>
        new Consumer({
          queue: 'q',
          schema: evil,
          pool: pool as never,
          handlers: { A: async () => undefined },
          logger: silentLogger,
        }),
      (err) => namesSchema(err, ConfigError),
    );
    assert.deepEqual(pool.used, []);
  });

  it('migrate rejects with InvalidIdentifierError naming schema', async () => {
    const pool = spyPool();
    await assert.rejects(migrate(pool as never, { schema: evil }), (err) => namesSchema(err, InvalidIdentifierError));
    await assert.rejects(migrate(connectionString, { schema: evil }), (err) =>
      namesSchema(err, InvalidIdentifierError),
    );
    assert.deepEqual(pool.used, []);
  });

  it('cleanup rejects with ConfigError naming schema', async () => {
    const pool = spyPool();
    await assert.rejects(cleanup(pool as never, { schema: evil, outboxRetentionMs: 1000 }), (err) =>
      namesSchema(err, ConfigError),
    );
    assert.deepEqual(pool.used, []);
  });

  it('readPipelineStatus rejects with ConfigError naming schema', async () => {
    const pool = spyPool();
    await assert.rejects(readPipelineStatus(pool as never, { schema: evil, sampleMs: 0 }), (err) =>
      namesSchema(err, ConfigError),
    );
    assert.deepEqual(pool.used, []);
  });

  it('appendToOutbox rejects with InvalidIdentifierError naming schema, before any statement', async () => {
    const pool = spyPool();
    const event = { aggregateType: 'order', aggregateId: '1', aggregateVersion: 1, eventType: 'Placed', payload: {} };
    await assert.rejects(appendToOutbox(pool as never, event, { schema: evil }), (err) =>
      namesSchema(err, InvalidIdentifierError),
    );
    assert.deepEqual(pool.used, []);
  });
});
