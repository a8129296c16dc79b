/**
 * Connection strings in the forms node-postgres reads beyond `postgres://user@host:port/db`: an empty
 * host with the server in the query (`postgres://user@/db?host=<socket directory or address>&port=N`),
 * used by migrate, the relay and the `converge` command against the real server of DATABASE_URL.
 * The host is the server's socket directory when it has one (the installed PostgreSQL), else its
 * address (the embedded one CI also runs listens on TCP only): either way through the query.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createInProcessTransport, migrate, startRelay } from '../../src/index.js';
import { cliNodeArgs } from '../support/cli-bundle.js';
import { databaseAddress } from '../support/database-url.js';
import { after, before, connectPostgres, DATABASE_URL, describe, it, uniqueName } from '../support/rig.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
let hostInQuery: string;

before(async () => {
  const pool = await connectPostgres();
  try {
    const { rows } = await pool.query<{ dirs: string }>("SELECT current_setting('unix_socket_directories') AS dirs");
    const dir = rows[0]!.dirs.split(',')[0]!.trim();
    const { host, port, database } = databaseAddress();
    const user = decodeURIComponent(new URL(DATABASE_URL).username) || 'postgres';
    const server = dir !== '' ? dir : host;
    hostInQuery = `postgres://${user}@/${encodeURIComponent(database)}?host=${encodeURIComponent(server)}&port=${port}`;
  } finally {
    await pool.end();
  }
});

describe('a connection string with an empty host and the server in the query', () => {
  const schemas: string[] = [];
  after(async () => {
    const pool = await connectPostgres();
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  it('migrates, runs a relay and the converge command', async () => {
    const schema = uniqueName('cvt_url');
    schemas.push(schema);
    assert.equal((await migrate(hostInQuery, { schema })).schema, schema);

    const relay = startRelay({ connectionString: hostInQuery, schema, transport: createInProcessTransport() });
    try {
      await relay.ready({ timeoutMs: 10_000 });
    } finally {
      await relay.stop();
    }

    const { stdout } = await promisify(execFile)(
      process.execPath,
      [...cliNodeArgs(), 'status', '--schema', schema, '--json'],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: hostInQuery, CONVERGE_LOG_LEVEL: 'warn' } },
    );
    assert.equal((JSON.parse(stdout) as { outbox: { pending: number } }).outbox.pending, 0);
  });
});
