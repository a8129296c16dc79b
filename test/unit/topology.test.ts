/**
 * A broker without the consistent-hash plugin answers the exchange declare by closing the whole
 * connection (503 COMMAND_INVALID); the declare itself only rejects with "Channel ended". These
 * check the classification on those exact shapes (as amqplib 2.x and RabbitMQ 3.10 produce them).
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import type amqp from 'amqplib';
import { errorLine } from '../../src/cli/program.js';
import { BrokerPluginMissingError } from '../../src/runtime/errors.js';
import { CONSISTENT_HASH, assertPluginExchange, unknownExchangeType } from '../../src/transport/topology.js';

/** amqplib's connection 'error' when RabbitMQ refuses the type: `reason` is "unknown" or "invalid". */
function connectionClosed(reason: 'unknown' | 'invalid', type = 'x-consistent-hash'): Error {
  return Object.assign(
    new Error(
      `Connection closed: 503 (COMMAND-INVALID) with message "COMMAND_INVALID - ${reason} exchange type '${type}'"`,
    ),
    { code: 503 },
  );
}

/** A channel whose declare fails the way amqplib's does when the broker closes the connection. */
function refusingChannel(closeWith: Error | undefined, rejectWith: Error): amqp.Channel {
  const connection = new EventEmitter();
  return {
    connection,
    async assertExchange() {
      if (closeWith) connection.emit('error', closeWith);
      throw rejectWith;
    },
  } as unknown as amqp.Channel;
}

const channelEnded = () => new Error('Channel ended, no reply will be forthcoming');

describe('topology: a missing exchange-type plugin', () => {
  it('reads the refused type from both refusals RabbitMQ sends, and nothing else', () => {
    assert.equal(unknownExchangeType(connectionClosed('unknown')), 'x-consistent-hash', 'never loaded on the node');
    assert.equal(unknownExchangeType(connectionClosed('invalid')), 'x-consistent-hash', 'plugin disabled since');
    assert.equal(unknownExchangeType(channelEnded()), undefined);
    const forbidden = Object.assign(new Error('Operation failed: ExchangeDeclare; 403 (ACCESS-REFUSED)'), {
      code: 403,
    });
    assert.equal(unknownExchangeType(forbidden), undefined);
    assert.equal(unknownExchangeType("unknown exchange type 'x-consistent-hash'"), undefined, 'not an Error');
  });

  it('turns the connection close behind "Channel ended" into BrokerPluginMissingError', async () => {
    const closed = connectionClosed('unknown');
    const error = await assertPluginExchange(refusingChannel(closed, channelEnded()), 'p', CONSISTENT_HASH, {}).then(
      () => assert.fail('declare succeeded'),
      (err: unknown) => err,
    );
    assert.ok(error instanceof BrokerPluginMissingError);
    assert.equal(error.code, 'CONVERGE_BROKER_PLUGIN_MISSING');
    assert.equal(error.plugin, 'rabbitmq_consistent_hash_exchange');
    assert.equal(error.exchangeType, 'x-consistent-hash');
    assert.equal(error.cause, closed);
    assert.match(error.message, /enable it with: rabbitmq-plugins enable rabbitmq_consistent_hash_exchange$/);
  });

  it('passes every other failure through unchanged', async () => {
    const other = connectionClosed('unknown', 'x-some-other-type');
    for (const [closeWith, rejectWith] of [
      [undefined, channelEnded()],
      [other, channelEnded()],
      [undefined, Object.assign(new Error('406 (PRECONDITION-FAILED) inequivalent arg'), { code: 406 })],
    ] as const) {
      await assert.rejects(
        assertPluginExchange(refusingChannel(closeWith, rejectWith), 'p', CONSISTENT_HASH, {}),
        (err: unknown) => err === rejectWith,
      );
    }
  });

  it('stops listening on the connection once the declare settled', async () => {
    const channel = refusingChannel(undefined, channelEnded());
    await assert.rejects(assertPluginExchange(channel, 'p', CONSISTENT_HASH, {}));
    assert.equal((channel.connection as unknown as EventEmitter).listenerCount('error'), 0);
  });

  it('the CLI prints it in full, so the command that enables the plugin reaches the user', () => {
    const line = errorLine(new BrokerPluginMissingError(CONSISTENT_HASH.plugin, CONSISTENT_HASH.exchangeType));
    assert.equal(
      line,
      "converge: CONVERGE_BROKER_PLUGIN_MISSING: RabbitMQ does not know the exchange type 'x-consistent-hash': " +
        'the plugin rabbitmq_consistent_hash_exchange is not enabled; ' +
        'enable it with: rabbitmq-plugins enable rabbitmq_consistent_hash_exchange',
    );
  });
});
