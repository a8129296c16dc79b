// test-files: heavy, starts PostgreSQL 18 servers of its own
/**
 * kit/embedded-postgres.ts, which chaos --pg embedded restarts under load: a restart keeps
 * committed data (fast: checkpoint; immediate: WAL recovery), ends the sessions and their open
 * transactions, and stop() or a signal leaves no server and no directory behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { EmbeddedPostgres } from '../../kit/embedded-postgres.js';
import { refused } from '../support/port-probe.js';
import { describe, test, waitFor } from '../support/rig.js';

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client(url);
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

describe('embedded PostgreSQL for chaos', () => {
  test('restarts fast and immediate keep committed rows and roll back the open transaction', async () => {
    const server = await EmbeddedPostgres.start();
    try {
      const setup = await connect(server.url);
      await setup.query('CREATE TABLE t (id text PRIMARY KEY)');
      await setup.query(`INSERT INTO t VALUES ('committed')`);
      await setup.end();
      for (const mode of ['fast', 'immediate'] as const) {
        const open = await connect(server.url);
        await open.query('BEGIN');
        await open.query(`INSERT INTO t VALUES ('open-${mode}')`);
        await server.restart(mode, 100);
        await assert.rejects(open.query('COMMIT'), `${mode}: the session of the open transaction ends`);
        await open.end().catch(() => undefined);
        const after = await connect(server.url);
        const { rows } = await after.query<{ id: string }>('SELECT id FROM t ORDER BY id');
        await after.end();
        assert.deepEqual(
          rows.map((row) => row.id),
          ['committed'],
          `${mode}: committed row kept, open one rolled back`,
        );
      }
    } finally {
      await server.stop();
    }
    assert.equal(existsSync(server.directory), false, 'directory removed');
    assert.ok(await refused(server.port), 'server stopped');
  });

  test('SIGINT to the process that started it stops the server and removes its directory', async () => {
    const script = `
      import { EmbeddedPostgres } from './kit/embedded-postgres.ts';
      const server = await EmbeddedPostgres.start();
      console.log(JSON.stringify({ port: server.port, directory: server.directory }));
      setInterval(() => undefined, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once('exit', (_code, signal) => resolve(signal)),
    );
    let signal: NodeJS.Signals | null;
    let started: { port: number; directory: string };
    try {
      // initdb and a cold tsx start take a while on a loaded machine.
      await waitFor(() => out.includes('\n'), 'the child started its server', 90_000);
      started = JSON.parse(out) as { port: number; directory: string };
      assert.equal(await refused(started.port), false, 'server up');
    } finally {
      // SIGINT in any case: the cleanup under test also keeps a failed run from leaving a server behind.
      child.kill('SIGINT');
      signal = await exited;
    }
    const { port, directory } = started;
    assert.equal(signal, 'SIGINT', 'the process still ends by the signal');
    assert.equal(existsSync(directory), false, 'directory removed');
    assert.ok(await refused(port), 'server stopped');
  });
});
