/**
 * scripts/env/choice.ts: which PostgreSQL and which broker `npm run lab` / `npm run demo` use.
 * Real services whenever configured or reachable; embedded / in-process only when nothing is
 * configured and nothing answers; a configured service that does not answer is an error.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseBroker, choosePostgres, describeChoice, type Probe } from '../../scripts/env/choice.js';

const PG_DEFAULT = 'postgres://postgres@127.0.0.1:5432/test';
const AMQP_DEFAULT = 'amqp://guest:guest@127.0.0.1:5672';
const pg = (over: Partial<Probe>): Probe => ({
  probeUrl: PG_DEFAULT,
  where: '127.0.0.1:5432',
  reachable: true,
  ...over,
});
const mq = (over: Partial<Probe>): Probe => ({
  probeUrl: AMQP_DEFAULT,
  where: '127.0.0.1:5672',
  reachable: true,
  ...over,
});

describe('local services: PostgreSQL choice', () => {
  it('uses the server at the default address when it answers', () => {
    assert.deepEqual(choosePostgres(pg({})), { use: 'server', url: PG_DEFAULT });
  });

  it('starts an embedded PostgreSQL only when DATABASE_URL is unset and nothing answers', () => {
    assert.deepEqual(choosePostgres(pg({ reachable: false, failure: 'ECONNREFUSED' })), { use: 'embedded' });
  });

  it('uses a configured DATABASE_URL, and never replaces it when it does not answer', () => {
    const url = 'postgres://app@db.example.com/orders';
    assert.deepEqual(choosePostgres(pg({ configuredUrl: url })), { use: 'server', url });
    const down = choosePostgres(
      pg({ configuredUrl: url, reachable: false, failure: 'PostgreSQL at db.example.com:5432: not answering' }),
    );
    assert.equal(down.use, 'none');
    assert.match(
      (down as { reason: string }).reason,
      /^DATABASE_URL is set, and PostgreSQL at db\.example\.com:5432: not answering/,
    );
  });
});

describe('local services: broker choice', () => {
  const both = [
    { accepted: true, available: true },
    { accepted: true, available: false },
    { accepted: false, available: true },
    { accepted: false, available: false },
  ];

  it('uses RabbitMQ whenever it answers, whatever the program accepts', () => {
    for (const inProcess of both)
      assert.deepEqual(chooseBroker(mq({}), inProcess), { use: 'rabbitmq', url: AMQP_DEFAULT });
    const url = 'amqp://u:p@mq.example.com';
    for (const inProcess of both)
      assert.deepEqual(chooseBroker(mq({ configuredUrl: url }), inProcess), { use: 'rabbitmq', url });
  });

  it('a configured AMQP_URL that does not answer is an error, never the in-process transport', () => {
    const choice = chooseBroker(mq({ configuredUrl: 'amqp://mq.example.com', reachable: false }), both[0]!);
    assert.equal(choice.use, 'none');
    assert.match((choice as { reason: string }).reason, /^AMQP_URL is set/);
  });

  it('nothing configured, nothing answering: in-process for a program that accepts it, once the transport exists', () => {
    const down = mq({ reachable: false, where: '127.0.0.1:1' });
    assert.deepEqual(chooseBroker(down, { accepted: true, available: true }), { use: 'in-process' });
    const notYet = chooseBroker(down, { accepted: true, available: false });
    assert.deepEqual(notYet, {
      use: 'none',
      reason:
        'no RabbitMQ reachable at 127.0.0.1:1; the in-process transport lands with the transport seam (install RabbitMQ, or set AMQP_URL)',
    });
    const lab = chooseBroker(down, { accepted: false, available: true });
    assert.match(
      (lab as { reason: string }).reason,
      /^no RabbitMQ reachable at 127\.0\.0\.1:1; this program needs a real broker/,
    );
  });

  it('says in one line what runs where', () => {
    assert.equal(
      describeChoice('embedded 18.4 (temporary, removed at exit)', '127.0.0.1:5672'),
      'PostgreSQL: embedded 18.4 (temporary, removed at exit) · RabbitMQ: 127.0.0.1:5672',
    );
  });
});
