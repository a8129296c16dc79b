/**
 * kit/pgbouncer.ts: what PgBouncer the pooler pass gets, from POOLER_DATABASE_URL and DATABASE_URL
 * alone (where it listens, where its server connections go, whether this machine may start it), and
 * the config it is started with.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pgBouncerDir, pgBouncerIni, pgBouncerSetup, pgBouncerUsers } from '../../kit/pgbouncer.js';

const POOLER = 'postgres://postgres@127.0.0.1:6432/test';
const BACKEND = 'postgres://postgres@127.0.0.1:5432/test';

/** The settings of one section of an ini text, as name -> value. */
function section(ini: string, name: string): Map<string, string> {
  const settings = new Map<string, string>();
  let current = '';
  for (const line of ini.split('\n')) {
    const header = /^\[(.+)\]$/.exec(line);
    if (header) current = header[1]!;
    else if (current === name && line.includes('=')) {
      const at = line.indexOf('=');
      settings.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
    }
  }
  return settings;
}

describe('pgbouncer: the pooler in front of DATABASE_URL', () => {
  it('listens where POOLER_DATABASE_URL points and connects to where DATABASE_URL points', () => {
    assert.deepEqual(pgBouncerSetup(POOLER, BACKEND), {
      where: '127.0.0.1:6432',
      listenHost: '127.0.0.1',
      listenPort: 6432,
      backendHost: '127.0.0.1',
      backendPort: 5432,
      authUser: 'postgres',
      local: true,
      frontsItself: false,
      dir: '/tmp/converge-pgbouncer-6432',
    });
    const socket = pgBouncerSetup('postgres://postgres@localhost:7000/test', 'postgres://admin@/test?host=/run/pg');
    assert.deepEqual(
      [socket.listenHost, socket.listenPort, socket.backendHost, socket.backendPort, socket.authUser],
      ['127.0.0.1', 7000, '/run/pg', 5432, 'admin'],
    );
    assert.equal(pgBouncerDir(7000), socket.dir);
  });

  it('starts only a pooler on a loopback address; a pooler that is DATABASE_URL itself fronts nothing', () => {
    for (const host of ['127.0.0.1', 'localhost', '[::1]'])
      assert.equal(pgBouncerSetup(`postgres://u@${host}:6432/db`, BACKEND).local, true, host);
    for (const host of ['pooler.example.com', '10.0.0.5'])
      assert.equal(pgBouncerSetup(`postgres://u@${host}:6432/db`, BACKEND).local, false, host);
    assert.equal(pgBouncerSetup(POOLER, 'postgres://postgres@localhost:6432/test').frontsItself, true);
    assert.equal(pgBouncerSetup(POOLER, POOLER).frontsItself, true);
    assert.equal(pgBouncerSetup(POOLER, 'postgres://postgres@127.0.0.1:5433/test').frontsItself, false);
  });

  it('writes a transaction-mode config that serves any database and looks up roles it does not list', () => {
    const setup = pgBouncerSetup(POOLER, 'postgres://admin@127.0.0.1:5444/test');
    const ini = pgBouncerIni(setup);
    assert.deepEqual([...section(ini, 'databases')], [['*', 'host=127.0.0.1 port=5444']]);
    const settings = section(ini, 'pgbouncer');
    assert.equal(settings.get('pool_mode'), 'transaction');
    assert.equal(settings.get('listen_addr'), '127.0.0.1');
    assert.equal(settings.get('listen_port'), '6432');
    assert.equal(settings.get('unix_socket_dir'), '', 'TCP only unless given the directory');
    assert.equal(settings.get('auth_type'), 'trust');
    assert.equal(settings.get('auth_user'), 'admin', 'roles a test creates are found through the server');
    assert.equal(settings.get('auth_file'), '/tmp/converge-pgbouncer-6432/userlist.txt');
    assert.equal(settings.get('pidfile'), '/tmp/converge-pgbouncer-6432/pgbouncer.pid');
    assert.equal(settings.get('logfile'), '/tmp/converge-pgbouncer-6432/pgbouncer.log');
    assert.ok(Number(settings.get('default_pool_size')) <= 50, "well under PostgreSQL's max_connections of 100");
    assert.ok(Number(settings.get('max_client_conn')) >= 1000, 'every pool of three test files at once');
    const socket = section(pgBouncerIni(setup, '/var/run/postgresql'), 'pgbouncer');
    assert.equal(socket.get('unix_socket_dir'), '/var/run/postgresql', "beside the server's own socket");
    assert.equal(pgBouncerUsers(setup), '"admin" ""\n');
    assert.equal(pgBouncerUsers(pgBouncerSetup(POOLER, 'postgres://we%22ird@127.0.0.1/test')), '"we""ird" ""\n');
  });
});
