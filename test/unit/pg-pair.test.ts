/**
 * kit/pg-pair.ts without servers: the settings each node gets from its ports and options (the
 * primary's synchronous standby and standby slots never reach the standby, which keeps them after
 * a promotion), failover slot settings only from PostgreSQL 17 on, and what still keeps a standby
 * from counting as streaming.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  multiHostUrl,
  pairHba,
  pairSettings,
  primaryConninfo,
  renderSettings,
  serverMajor,
  streamingGap,
  type PairLayout,
} from '../../kit/pg-pair.js';

const layout = (synchronous: boolean, major = 18): PairLayout => ({
  user: 'postgres',
  ports: { primary: 6001, standby: 6002 },
  synchronous,
  major,
});

const REPLICATION = { wal_level: 'logical', max_wal_senders: 10, max_replication_slots: 10, hot_standby: 'on' };

describe('pg-pair: config of a primary and its streaming standby', () => {
  it('reads the major version from postgres --version', () => {
    assert.equal(serverMajor('postgres (PostgreSQL) 18.4\n'), 18);
    assert.equal(serverMajor('postgres (PostgreSQL) 17beta1'), 17);
    assert.equal(serverMajor('postgres (PostgreSQL) 16.9 (Debian 16.9-1.pgdg120+1)'), 16);
    assert.throws(() => serverMajor('bash: postgres: not found'), /cannot read a PostgreSQL version/);
  });

  it('a synchronous primary names the standby, waits for it, and holds failover slots back to its slot', () => {
    assert.deepEqual(pairSettings('primary', layout(true)), {
      port: 6001,
      listen_addresses: '127.0.0.1',
      unix_socket_directories: '',
      cluster_name: 'converge-primary',
      ...REPLICATION,
      synchronous_standby_names: 'standby1',
      synchronous_commit: 'on',
      synchronized_standby_slots: 'standby1_slot',
    });
  });

  it('an asynchronous primary has no synchronous standby', () => {
    const settings = pairSettings('primary', layout(false));
    assert.equal(settings.synchronous_standby_names, undefined);
    assert.equal(settings.synchronous_commit, undefined);
    assert.equal(settings.synchronized_standby_slots, 'standby1_slot');
  });

  it('the standby streams from the primary through its slot, on a port of its own, and syncs failover slots', () => {
    assert.deepEqual(pairSettings('standby', layout(true)), {
      port: 6002,
      listen_addresses: '127.0.0.1',
      unix_socket_directories: '',
      cluster_name: 'converge-standby',
      ...REPLICATION,
      primary_conninfo: 'host=127.0.0.1 port=6001 user=postgres application_name=standby1 dbname=postgres',
      primary_slot_name: 'standby1_slot',
      hot_standby_feedback: 'on',
      sync_replication_slots: 'on',
    });
  });

  it('the standby gets none of the primary-only settings, so once promoted its commits wait for nobody', () => {
    for (const synchronous of [true, false]) {
      const settings = pairSettings('standby', layout(synchronous));
      for (const name of ['synchronous_standby_names', 'synchronous_commit', 'synchronized_standby_slots'])
        assert.equal(settings[name], undefined, `${name} (synchronous: ${synchronous})`);
    }
  });

  it('before PostgreSQL 17 no failover slot settings (the server would refuse to start on them) and no dbname', () => {
    const primary = pairSettings('primary', layout(true, 16));
    const standby = pairSettings('standby', layout(true, 16));
    assert.equal(primary.synchronized_standby_slots, undefined);
    assert.equal(standby.sync_replication_slots, undefined);
    assert.equal(standby.primary_conninfo, 'host=127.0.0.1 port=6001 user=postgres application_name=standby1');
    assert.equal(primaryConninfo(layout(false, 17)).endsWith(' dbname=postgres'), true);
    assert.equal(primary.synchronous_standby_names, 'standby1', 'still synchronous');
  });

  it('renders settings as postgresql.conf lines, quotes doubled', () => {
    assert.equal(
      renderSettings({ port: 6001, unix_socket_directories: '', primary_conninfo: "host=x password='p'" }),
      "port = '6001'\nunix_socket_directories = ''\nprimary_conninfo = 'host=x password=''p'''\n",
    );
  });

  it('pg_hba trusts TCP from 127.0.0.1 for sessions and replication alike, and nothing else', () => {
    assert.deepEqual(pairHba().trim().split('\n'), [
      'host all all 127.0.0.1/32 trust',
      'host replication all 127.0.0.1/32 trust',
    ]);
  });

  it('the multi-host URL lists the primary first and asks for a node that takes writes', () => {
    assert.equal(
      multiHostUrl('postgres', { primary: 6001, standby: 6002 }),
      'postgres://postgres@127.0.0.1:6001,127.0.0.1:6002/postgres?target_session_attrs=read-write',
    );
  });

  it('says what keeps the standby from counting as streaming', () => {
    const row = (state: string | null, sync_state: string | null) => ({
      application_name: 'standby1',
      state,
      sync_state,
    });
    assert.match(streamingGap([], false)!, /has not connected/);
    assert.match(
      streamingGap([{ application_name: 'other', state: 'streaming', sync_state: 'async' }], false)!,
      /no walsender for standby1/,
    );
    assert.match(streamingGap([row('catchup', 'async')], false)!, /state catchup, not streaming/);
    assert.equal(streamingGap([row('streaming', 'async')], false), undefined);
    assert.match(streamingGap([row('streaming', 'async')], true)!, /sync_state is async, not sync/);
    assert.match(streamingGap([row('streaming', 'potential')], true)!, /sync_state is potential/);
    assert.equal(streamingGap([row('streaming', 'sync')], true), undefined);
  });
});
