/**
 * The front door's option rules, without I/O: a Converge opens no connection until something uses
 * its pool, so every refusal here happens before anything could have been written or started.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { createConverge, defineEvents } from '../../src/index.js';
import { ConfigError, EnvelopeValidationError } from '../../src/errors.js';

const URL = 'postgres://nobody@127.0.0.1:1/none';

function refusal(run: () => unknown): ConfigError {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `a ConfigError, not ${String(err)}`);
    return err;
  }
  assert.fail('expected a ConfigError');
}

describe('createConverge', () => {
  it('requires a connection and names unknown and malformed options', () => {
    assert.equal(refusal(() => createConverge({})).field, 'connectionString');
    const problems = refusal(() => createConverge({ connectionString: URL, schema: '', shema: 'x' } as never)).problems;
    assert.deepEqual(problems.map((p) => p.path).sort(), ['schema', 'shema']);
  });

  it('refuses a shared option repeated by a component, naming each one', async () => {
    const converge = createConverge({ connectionString: URL, amqpUrl: 'amqp://127.0.0.1:1' });
    try {
      const relay = refusal(() => converge.startRelay({ schema: 'other', exchange: 'x' } as never));
      assert.deepEqual(
        relay.problems.map((p) => p.path),
        ['exchange', 'schema'],
      );
      assert.match(relay.message, /set once in createConverge; startRelay inherits it/);
      const consumer = refusal(() =>
        converge.startConsumer({ queue: 'q', handlers: {}, amqpUrl: 'amqp://elsewhere', logger: console } as never),
      );
      assert.deepEqual(
        consumer.problems.map((p) => p.path),
        ['amqpUrl', 'logger'],
      );
      const cdc = refusal(() => converge.startCdcRelay({ slot: 's', pool: new pg.Pool() } as never));
      assert.equal(cdc.field, 'pool');
      await assert.rejects(
        async () => converge.reconcile({ schema: 'other' } as never),
        (err: unknown) => err instanceof ConfigError && err.field === 'schema',
      );
    } finally {
      await converge.close();
    }
  });

  it('checks appended events against its catalog before any statement runs', async () => {
    const events = defineEvents({
      Placed: { '~standard': { version: 1, vendor: 'test', validate: (v: unknown) => ({ value: v }) } },
    });
    const converge = createConverge({ connectionString: URL, events });
    let queried = 0;
    const tx = { query: async () => ((queried += 1), { rows: [], rowCount: 0 }) };
    try {
      await assert.rejects(
        converge.append(tx, {
          aggregateType: 'order',
          aggregateId: 'o-1',
          aggregateVersion: 1,
          // @ts-expect-error not an event type of the catalog
          eventType: 'Shipped',
          payload: {},
        }),
        (err: unknown) => err instanceof EnvelopeValidationError && err.message.includes('not in the event catalog'),
      );
      assert.equal(queried, 0);
    } finally {
      await converge.close();
    }
  });

  it('leaves a pool it was given open, and ends the one it opened', async () => {
    const given = new pg.Pool({ connectionString: URL });
    const borrowed = createConverge({ pool: given });
    await borrowed.close();
    assert.equal(given.ended, false);
    await given.end();
    const owned = createConverge({ connectionString: URL });
    await owned.close();
    assert.equal(owned.pool.ended, true);
  });
});
