/**
 * scripts/services.ts decides from DATABASE_URL / AMQP_URL alone which services it may start and
 * configure (local ones) and which it only checks (remote ones); these pin that decision.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { amqpTarget, isLocalHost, isNotRunning, postgresTarget } from '../../scripts/services.js';

describe('services: which services are local', () => {
  it('treats loopback addresses and Unix sockets as local, anything else as remote', () => {
    for (const host of ['127.0.0.1', '127.0.1.1', 'localhost', 'LOCALHOST', '::1', '[::1]', '/var/run/postgresql'])
      assert.equal(isLocalHost(host), true, host);
    for (const host of ['db.example.com', '10.0.0.5', '192.168.1.2', 'postgres', '128.0.0.1', 'localhost.evil.com'])
      assert.equal(isLocalHost(host), false, host);
  });

  it('reads host, port and database from a PostgreSQL URL, with pg defaults for what it omits', () => {
    assert.deepEqual(postgresTarget('postgres://postgres@127.0.0.1:5432/test'), {
      where: '127.0.0.1:5432',
      host: '127.0.0.1',
      port: 5432,
      local: true,
      database: 'test',
    });
    const remote = postgresTarget('postgres://app:s3cret@db.example.com:6432/orders?sslmode=require');
    assert.deepEqual(
      [remote.host, remote.port, remote.database, remote.local],
      ['db.example.com', 6432, 'orders', false],
    );
    const socket = postgresTarget('postgres://postgres@/scratch?host=/var/run/postgresql');
    assert.deepEqual(
      [socket.host, socket.port, socket.database, socket.local],
      ['/var/run/postgresql', 5432, 'scratch', true],
    );
    const bare = postgresTarget('postgresql://alice@localhost');
    assert.deepEqual([bare.port, bare.database, bare.local], [5432, 'alice', true]);
    assert.equal(postgresTarget('postgres://u@h/my%20db').database, 'my db');
  });

  it('reads host and port from an AMQP URL, 5672 or 5671 (amqps) by default', () => {
    assert.deepEqual(amqpTarget('amqp://guest:guest@127.0.0.1:5672'), {
      where: '127.0.0.1:5672',
      host: '127.0.0.1',
      port: 5672,
      local: true,
    });
    assert.equal(amqpTarget('amqp://localhost').port, 5672);
    const tls = amqpTarget('amqps://user:pw@mq.example.com/vhost');
    assert.deepEqual([tls.port, tls.local], [5671, false]);
  });

  it('starts a local service only when nothing answers, never when a running one refuses', () => {
    const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    assert.equal(isNotRunning(coded('ECONNREFUSED')), true);
    assert.equal(isNotRunning(coded('ENOENT')), true, 'no Unix socket');
    assert.equal(isNotRunning(coded('57P03', 'the database system is starting up')), true);
    assert.equal(isNotRunning(new Error('Socket closed abruptly during opening handshake')), true);
    assert.equal(isNotRunning(coded('28P01', 'password authentication failed')), false);
    assert.equal(isNotRunning(coded('3D000', 'database "x" does not exist')), false);
    assert.equal(
      isNotRunning(new Error('Handshake terminated by server: 403 (ACCESS-REFUSED) with message "ACCESS_REFUSED"')),
      false,
    );
  });
});
