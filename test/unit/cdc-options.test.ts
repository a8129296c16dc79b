import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/runtime/errors.js';
import { DEFAULT_CDC_SLOT, cdcRelayOptions } from '../../src/relay/index.js';

const base = { connectionString: 'postgres://nobody@127.0.0.1:1/none', amqpUrl: 'amqp://x' };

function problems(input: unknown): string[] {
  try {
    cdcRelayOptions.parse(input);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

describe('cdcRelayOptions', () => {
  it('resolves defaults: slot and publication, the broker URL as a list', () => {
    const options = cdcRelayOptions.parse(base);
    assert.equal(options.slot, DEFAULT_CDC_SLOT);
    assert.equal(options.publication, DEFAULT_CDC_SLOT);
    assert.deepEqual(options.amqpUrl, ['amqp://x']);
    assert.equal(options.createSlot, true);
    assert.equal(typeof options.routingKey, 'function');
  });

  it('rejects unknown options naming the field and the nearest known one', () => {
    assert.deepEqual(problems({ ...base, slott: 'x' }), ["slott: unknown option 'slott' (did you mean 'slot'?)"]);
  });

  it('requires a connection and a broker URL, and checks identifiers and bounds, all in one error', () => {
    const found = problems({ slot: 'Bad-Name', maxInFlight: 0 });
    assert.ok(found.some((p) => p.startsWith('connectionString:')));
    assert.ok(found.some((p) => p.startsWith('amqpUrl:')));
    assert.ok(found.some((p) => p.startsWith('slot:')));
    assert.ok(found.some((p) => p.startsWith('maxInFlight:')));
  });

  it('takes its fault-injection hooks as options, and only those it knows', () => {
    const parsed = cdcRelayOptions.parse({ ...base, hooks: { beforeAcknowledge: () => undefined } });
    assert.equal(typeof parsed.hooks.beforeAcknowledge, 'function');
    assert.deepEqual(cdcRelayOptions.parse(base).hooks, {});
    assert.deepEqual(problems({ ...base, hooks: { afterConfirm: () => undefined } }), [
      "hooks.afterConfirm: unknown option 'afterConfirm'",
    ]);
  });
});
