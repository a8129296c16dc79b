import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseHostList, sessionCheck } from '../../src/runtime/host-list.js';

test('one host is left to node-postgres as it is', () => {
  assert.equal(parseHostList('postgres://u:p@db1:5432/app?sslmode=require'), undefined);
  assert.equal(parseHostList('/var/run/postgresql app'), undefined);
});

test('a host list: the hosts in order, default ports, and one URL per host without target_session_attrs', () => {
  const list = parseHostList(
    'postgres://u:p%40ss@db1,db2:5433,[::1]:5434/app?target_session_attrs=read-write&sslmode=require',
  );
  assert.ok(list);
  assert.deepEqual(list.hosts, [
    { host: 'db1', port: 5432 },
    { host: 'db2', port: 5433 },
    { host: '::1', port: 5434 },
  ]);
  assert.equal(list.targetSessionAttrs, 'read-write');
  assert.equal(list.urlFor(list.hosts[1]!), 'postgres://u:p%40ss@db2:5433/app?sslmode=require');
  assert.equal(list.urlFor(list.hosts[2]!), 'postgres://u:p%40ss@[::1]:5434/app?sslmode=require');
});

test('target_session_attrs defaults to any; a list without a query keeps none', () => {
  const list = parseHostList('postgresql://db1:1,db2:2/app');
  assert.equal(list?.targetSessionAttrs, 'any');
  assert.equal(list?.urlFor({ host: 'db1', port: 1 }), 'postgresql://db1:1/app');
});

test('an unusable list is refused with a reason that never quotes the URL', () => {
  for (const [url, reason] of [
    ['postgres://u:secret@db1,,db2/app', /empty host/],
    ['postgres://u:secret@db1:99999,db2/app', /out of range/],
    ['postgres://u:secret@%2Ftmp,db2/app', /socket directory/],
    ['postgres://u:secret@db1,db2/app?target_session_attrs=prefer-standby', /any, read-write or primary/],
  ] as const)
    assert.throws(
      () => parseHostList(url),
      (err: Error) => reason.test(err.message) && !err.message.includes('secret'),
    );
});

test('the session checks: read-write asks transaction_read_only, primary asks pg_is_in_recovery, any asks nothing', () => {
  assert.match(sessionCheck('read-write')!, /transaction_read_only/);
  assert.match(sessionCheck('primary')!, /pg_is_in_recovery/);
  assert.equal(sessionCheck('any'), undefined);
});
