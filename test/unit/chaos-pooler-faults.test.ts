/** chaos --pg pooler: where the workers connect, and the URLs the run derives for its own PgBouncer and direct sessions. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { isPoolerFault, poolerUrlFor, withApplicationName, workerConnection } from '../../chaos/pooler-faults.js';

test('the run’s pooler URL keeps the backend’s user, password, database and parameters, on 127.0.0.1 and its own port', () => {
  assert.equal(
    poolerUrlFor('postgres://postgres@127.0.0.1:5432/test', 41234),
    'postgres://postgres@127.0.0.1:41234/test',
  );
  assert.equal(
    poolerUrlFor('postgresql://app:s%40cret@db.internal:6543/orders?sslmode=disable', 7000),
    'postgresql://app:s%40cret@127.0.0.1:7000/orders?sslmode=disable',
  );
  // A Unix-socket backend: the socket directory must not follow, or pg would connect there instead.
  const socket = connectsAs({
    connectionString: poolerUrlFor('postgres://postgres@/test?host=/var/run/postgresql', 7001),
  });
  assert.equal(socket.host, '127.0.0.1');
  assert.equal(socket.port, 7001);
  assert.equal(socket.database, 'test');
  assert.equal(socket.user, 'postgres');
});

test('application_name in the direct URL names the session the library opens itself', () => {
  // The library opens its direct pool with application_name converge-relay; the URL's must win.
  const url = withApplicationName('postgres://postgres@127.0.0.1:5432/test', 'chaos-x-relay-a');
  assert.equal(
    connectsAs({ connectionString: url, application_name: 'converge-relay' }).application_name,
    'chaos-x-relay-a',
  );
  const replaced = withApplicationName('postgres://u@h:1/d?application_name=old&options=-c%20x%3D1', 'new one');
  assert.equal(connectsAs({ connectionString: replaced }).application_name, 'new one');
  assert.equal(connectsAs({ connectionString: replaced }).options, '-c x=1');
});

test('through the pooler: transaction pool mode; only exclusive relays get a direct session, for the relay lock', () => {
  const urls = { direct: 'postgres://d/db', pooler: 'postgres://p/db' };
  assert.deepEqual(workerConnection('shared', 'polling', urls), { databaseUrl: urls.direct, poolMode: 'session' });
  assert.deepEqual(workerConnection('embedded', 'exclusive', urls), { databaseUrl: urls.direct, poolMode: 'session' });
  assert.deepEqual(workerConnection('pooler', 'polling', urls), { databaseUrl: urls.pooler, poolMode: 'transaction' });
  assert.deepEqual(workerConnection('pooler', 'exclusive', urls), {
    databaseUrl: urls.pooler,
    poolMode: 'transaction',
    directUrl: urls.direct,
  });
  assert.throws(() => workerConnection('pooler', 'cdc', urls), /replication connection/);
  assert.throws(
    () => workerConnection('pooler', 'polling', { direct: urls.direct, pooler: undefined }),
    /no PgBouncer/,
  );
});

test('restart-pooler is the one pooler fault', () => {
  assert.ok(isPoolerFault('restart-pooler'));
  assert.ok(!isPoolerFault('pg-restart-fast'));
  assert.ok(!isPoolerFault('terminate-backends'));
});

/** What pg itself will connect with (it never connects here): the config merged with the URL's parameters. */
function connectsAs(config: pg.ClientConfig): Record<string, unknown> {
  return (new pg.Client(config) as unknown as { connectionParameters: Record<string, unknown> }).connectionParameters;
}
