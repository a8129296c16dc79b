import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BrokerAddresses } from '../../src/transport/broker-addresses.js';
import { amqpUrl } from '../../src/cli/env.js';

const [a, b, c] = ['amqp://u:p@10.0.0.1:5672', 'amqp://u:p@10.0.0.2:5672', 'amqp://u:p@10.0.0.3:5672'];

describe('BrokerAddresses', () => {
  it('tries every node once, the first given first', () => {
    assert.deepEqual(new BrokerAddresses([a, b, c]).order(), [a, b, c]);
  });

  it('a single URL is a list of one', () => {
    assert.deepEqual(new BrokerAddresses(a).order(), [a]);
  });

  it('refuses an empty list', () => {
    assert.throws(() => new BrokerAddresses([]), RangeError);
  });

  it('keeps the node it connected to first', () => {
    const brokers = new BrokerAddresses([a, b, c]);
    brokers.connected(b);
    assert.deepEqual(brokers.order(), [b, c, a]);
  });

  it('moves a node that dropped the connection to the back', () => {
    const brokers = new BrokerAddresses([a, b, c]);
    brokers.connected(a);
    brokers.lost(a);
    assert.deepEqual(brokers.order(), [b, c, a]);
    brokers.lost(c); // not the preferred one: the order stays
    assert.deepEqual(brokers.order(), [b, c, a]);
  });

  it('names the preferred node without its credentials', () => {
    const brokers = new BrokerAddresses([a, b]);
    brokers.lost(a);
    assert.equal(brokers.target.endpoint, '10.0.0.2:5672');
    assert.doesNotMatch(JSON.stringify(brokers.target), /u:p/);
  });
});

describe('CLI broker URLs', () => {
  it('reads a comma-separated list as a cluster', () => {
    assert.deepEqual(amqpUrl(`${a}, ${b},${c}`, {}), [a, b, c]);
  });

  it('keeps one URL a string', () => {
    assert.equal(amqpUrl(undefined, { AMQP_URL: a }), a);
  });
});
