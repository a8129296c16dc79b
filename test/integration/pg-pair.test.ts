// test-files: heavy, starts PostgreSQL 18 primaries and standbys of its own
/**
 * kit/pg-pair.ts, the primary with a streaming standby that failover tests stand on: the standby
 * is read-only and gets what the primary commits (synchronous: before the commit returns), takes
 * writes once promoted after the primary crashed, keeps a failover logical slot across that
 * promotion, and a start that fails half-way says what was missing and leaves nothing behind.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { PgPair } from '../../kit/pg-pair.js';
import { refused } from '../support/port-probe.js';
import { describe, test, waitFor } from '../support/rig.js';

const run = promisify(execFile);

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client(url);
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function ids(client: pg.Client): Promise<number[]> {
  const { rows } = await client.query<{ id: number }>('SELECT id FROM t ORDER BY id');
  return rows.map((row) => row.id);
}

async function inRecovery(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ recovery: boolean }>('SELECT pg_is_in_recovery() AS recovery');
  return rows[0]!.recovery;
}

/** The port of the server a libpq client lands on for `url`: node-postgres cannot read a multi-host URL, psql can. */
async function psqlPort(url: string): Promise<number> {
  try {
    const { stdout } = await run('psql', [url, '-XAtc', 'SELECT inet_server_port()'], { timeout: 30_000 });
    return Number(stdout.trim());
  } catch (err) {
    const { code, stderr } = err as { code?: string; stderr?: string };
    if (code === 'ENOENT')
      throw new Error('psql is not installed (Debian: postgresql-client), needed to try the multi-host URL');
    throw new Error(`psql ${url} failed: ${stderr?.trim() || (err as Error).message}`);
  }
}

/** Processes whose command line names `text`: a postmaster's names its data directory. */
function serversOf(text: string): string[] {
  return readdirSync('/proc').filter((pid) => {
    try {
      return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
    } catch {
      return false; // ended while we looked
    }
  });
}

async function assertReadOnly(standby: pg.Client): Promise<void> {
  assert.equal(await inRecovery(standby), true, 'the standby is in recovery');
  await assert.rejects(standby.query('INSERT INTO t VALUES (-1)'), { code: '25006' }, 'the standby refuses writes');
}

describe('a PostgreSQL primary with a streaming standby', () => {
  test('synchronous: commits are on the standby when they return; after a crash the promoted standby takes writes and the failover slot', async () => {
    const pair = await PgPair.start({ synchronous: true });
    const clients: pg.Client[] = [];
    try {
      assert.ok(pair.major >= 17, `failover slots need PostgreSQL 17+, the embedded server is ${pair.major}`);
      const primary = await connect(pair.primaryUrl);
      const standby = await connect(pair.standbyUrl);
      clients.push(primary, standby);
      assert.equal(await psqlPort(pair.multiHostUrl), pair.ports.primary, 'the multi-host URL lands on the primary');

      await primary.query(`SELECT pg_create_logical_replication_slot('cdc', 'test_decoding', false, false, true)`);
      await primary.query('CREATE TABLE t (id int PRIMARY KEY)');
      await primary.query('BEGIN');
      await primary.query('INSERT INTO t SELECT generate_series(1, 100)');
      const { rows: before } = await primary.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn() AS lsn');
      await primary.query('COMMIT');
      const { rows: flushed } = await primary.query<{ flushed: boolean; sync_state: string }>(
        `SELECT flush_lsn >= $1::pg_lsn AS flushed, sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`,
        [before[0]!.lsn],
      );
      assert.deepEqual(
        flushed,
        [{ flushed: true, sync_state: 'sync' }],
        'the standby flushed the commit before it returned',
      );

      // Flushed is not yet applied: the rows become visible on the standby a moment later.
      await waitFor(async () => (await ids(standby)).length === 100, 'the rows on the standby');
      await assertReadOnly(standby);

      // A CDC relay confirms its slot as it goes; only a slot that moved since the standby synced it is persisted there.
      await waitFor(
        async () => {
          await primary.query('SELECT pg_log_standby_snapshot()');
          await primary.query(`SELECT pg_replication_slot_advance('cdc', pg_current_wal_lsn())`);
          const { rows } = await standby.query<{ synced: boolean; temporary: boolean }>(
            `SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = 'cdc'`,
          );
          return rows[0]?.synced === true && rows[0].temporary === false;
        },
        'the failover slot synced and persisted on the standby',
        60_000,
      );
      await primary.query('INSERT INTO t VALUES (101)');

      await pair.failPrimary('immediate');
      assert.ok(await refused(pair.ports.primary), 'the primary is down');
      await pair.promoteStandby();
      assert.equal(await inRecovery(standby), false, 'the promoted standby is out of recovery');
      await standby.query('INSERT INTO t VALUES (102)');
      assert.deepEqual(
        await ids(standby),
        Array.from({ length: 102 }, (_, i) => i + 1),
        'every row committed on the primary survived its crash, and the promoted standby takes writes',
      );
      assert.equal(
        await psqlPort(pair.multiHostUrl),
        pair.ports.standby,
        'the multi-host URL lands on the new primary',
      );

      const { rows: changes } = await standby.query<{ data: string }>(
        `SELECT data FROM pg_logical_slot_get_changes('cdc', NULL, NULL)`,
      );
      const inserted = changes.map((row) => row.data).filter((data) => data.startsWith('table public.t: INSERT'));
      for (const id of [101, 102])
        assert.ok(
          inserted.includes(`table public.t: INSERT: id[integer]:${id}`),
          `the failover slot on the new primary sends row ${id}: ${inserted.slice(-3).join(' | ')}`,
        );
    } finally {
      for (const client of clients) await client.end().catch(() => undefined);
      await pair.stop();
    }
    assert.equal(existsSync(pair.directory), false, 'directory removed');
    assert.ok(await refused(pair.ports.standby), 'the standby stopped');
    // A caller's finally may stop a pair its body already stopped.
    await pair.stop();
  });

  test('asynchronous: the standby follows, a fast stop of the primary loses nothing, and the promoted standby takes writes', async () => {
    const pair = await PgPair.start({ synchronous: false });
    const clients: pg.Client[] = [];
    try {
      const primary = await connect(pair.primaryUrl);
      const standby = await connect(pair.standbyUrl);
      clients.push(primary, standby);
      const { rows: replication } = await primary.query<{ state: string; sync_state: string }>(
        `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'standby1'`,
      );
      assert.deepEqual(replication, [{ state: 'streaming', sync_state: 'async' }]);

      await primary.query('CREATE TABLE t (id int PRIMARY KEY)');
      await primary.query('INSERT INTO t SELECT generate_series(1, 50)');
      await waitFor(async () => (await ids(standby)).length === 50, 'the rows on the standby');
      await assertReadOnly(standby);

      // A fast shutdown waits until the standby has flushed all the WAL, so even rows it has not seen yet are kept.
      await primary.query('INSERT INTO t SELECT generate_series(51, 60)');
      await pair.failPrimary('fast');
      await pair.promoteStandby();
      await standby.query('INSERT INTO t VALUES (61)');
      assert.deepEqual(
        await ids(standby),
        Array.from({ length: 61 }, (_, i) => i + 1),
        'every committed row survived the fast stop, and the promoted standby takes writes',
      );
    } finally {
      for (const client of clients) await client.end().catch(() => undefined);
      await pair.stop();
    }
    assert.equal(existsSync(pair.directory), false, 'directory removed');
    assert.ok(await refused(pair.ports.primary), 'the primary stopped');
    assert.ok(await refused(pair.ports.standby), 'the standby stopped');
  });

  test('a standby that cannot start fails the start with the reason from its log, and the running primary is stopped', async () => {
    const servers = () => new Set(serversOf('converge-pgpair-'));
    const directories = () => new Set(readdirSync(os.tmpdir()).filter((name) => name.startsWith('converge-pgpair-')));
    const before = { servers: servers(), directories: directories() };
    await assert.rejects(
      PgPair.start({ synchronous: true, settings: { standby: { max_connections: 'many' } } }),
      (err: Error) => {
        assert.match(err.message, /^PgPair: pg_ctl start \(standby\) failed: /);
        assert.match(err.message, /standby log \(.*\):\n[^]*invalid value for parameter "max_connections": "many"/);
        return true;
      },
    );
    assert.deepEqual(
      [...servers()].filter((pid) => !before.servers.has(pid)),
      [],
      'no server of the failed start is left',
    );
    assert.deepEqual(
      [...directories()].filter((name) => !before.directories.has(name)),
      [],
      'its directory is removed',
    );
  });

  test('a start that fails on a missing command names it, and leaves nothing behind', async () => {
    // After initdb, cp is the one command PgPair runs from PATH (for the standby's copy): a PATH without it fails there.
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'converge-pgpair-test-'));
    const bin = path.join(tmp, 'bin');
    const temp = path.join(tmp, 'temp');
    mkdirSync(bin);
    mkdirSync(temp);
    // The servers' user (as root, postgres) must reach the pair's directory inside.
    chmodSync(tmp, 0o755);
    chmodSync(temp, 0o755);
    for (const command of ['id', 'groupadd', 'useradd']) {
      const found = ['/usr/bin', '/usr/sbin', '/bin', '/sbin'].map((dir) => path.join(dir, command)).find(existsSync);
      if (found) symlinkSync(found, path.join(bin, command));
    }
    // The child looks before it exits: its exit hook would clean up after a start that did not, and hide that.
    const script = `
      import { readdirSync, readFileSync } from 'node:fs';
      import { PgPair } from './kit/pg-pair.ts';
      let message = 'started';
      try {
        await PgPair.start({ synchronous: true });
      } catch (err) {
        message = err.message;
      }
      const temp = process.env.TMPDIR;
      const servers = readdirSync('/proc').filter((pid) => {
        try {
          return /^[0-9]+$/.test(pid) && readFileSync('/proc/' + pid + '/cmdline', 'utf8').includes(temp);
        } catch {
          return false;
        }
      });
      // tsx keeps its cache in the same TMPDIR.
      const left = readdirSync(temp).filter((name) => name.startsWith('converge-pgpair-'));
      console.log(JSON.stringify({ message, servers, left }));`;
    try {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        env: { ...process.env, PATH: bin, TMPDIR: temp },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      assert.equal(code, 0, `the child ended on its own: ${out}`);
      const seen = JSON.parse(out) as { message: string; servers: string[]; left: string[] };
      assert.equal(seen.message, `PgPair: cp not found on PATH (${bin})`, 'names the command it could not find');
      assert.deepEqual(seen.servers, [], 'no server is left');
      assert.deepEqual(seen.left, [], 'the pair directory is removed');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
