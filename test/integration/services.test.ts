// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
// test-files: session, needs PostgreSQL itself at DATABASE_URL: scripts/services.ts creates databases there
/**
 * scripts/services.ts against the real local services, without disturbing them: the fast path when
 * everything is up, and the database-creation path on a uniquely named scratch database.
 * (Starting a stopped server and enabling a disabled plugin would disturb services other runs share;
 * those paths were run by hand, against the shared broker once and against a spare node and cluster.)
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freePort } from '../../kit/ports.js';
import pg from 'pg';
import { CDC_DATABASE_URL } from '../../kit/services.js';
import { DATABASE_URL, connectPostgres, describe, test, uniqueName } from '../support/rig.js';

const run = promisify(execFile);

async function walLevelOf(url: string): Promise<string | undefined> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<{ wal_level: string }>('SHOW wal_level')).rows[0]?.wal_level;
  } finally {
    await client.end();
  }
}

/** Runs the script as the npm scripts do; resolves with its exit code and stderr. */
async function services(env: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/services.ts'], {
      env: { ...process.env, ...env },
    });
    return { code: 0, stderr };
  } catch (err) {
    const failed = err as { code: number; stderr: string };
    return { code: failed.code, stderr: failed.stderr };
  }
}

describe('npm run services', () => {
  test('with both services up it only checks them and says so in one line', async () => {
    const { code, stderr } = await services();
    assert.equal(code, 0, stderr);
    assert.match(
      stderr,
      /^services: PostgreSQL \S+:\d+\/\S+ ok; PgBouncer \S+:\d+ ok; RabbitMQ \S+:\d+ ok; PostgreSQL \(CDC\) \S+:\d+\/\S+ ok\n$/,
    );
  });

  test('the CDC PostgreSQL it prepares has wal_level=logical', async () => {
    const { code, stderr } = await services();
    assert.equal(code, 0, stderr);
    const client = new pg.Client(CDC_DATABASE_URL);
    await client.connect();
    try {
      const { rows } = await client.query<{ wal_level: string }>('SHOW wal_level');
      assert.equal(rows[0]?.wal_level, 'logical');
    } finally {
      await client.end();
    }
  });

  test('a CDC_DATABASE_URL on a server without wal_level=logical that it did not create is an error, and left alone', async () => {
    const before = await walLevelOf(DATABASE_URL);
    assert.notEqual(before, 'logical', 'the shared server here is not logical; this test needs one that is not');
    const { code, stderr } = await services({ CDC_DATABASE_URL: DATABASE_URL });
    assert.equal(code, 1);
    assert.match(stderr, /PostgreSQL for CDC at \S+: wal_level is not logical; set wal_level = logical on that server/);
    assert.equal(await walLevelOf(DATABASE_URL), before, 'not reconfigured');
  });

  test('creates the database DATABASE_URL names on the local server, once', async () => {
    const database = uniqueName('converge_scratch');
    const url = new URL(DATABASE_URL);
    url.pathname = `/${database}`;
    const admin = await connectPostgres(1);
    try {
      const first = await services({ DATABASE_URL: url.toString() });
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stderr, new RegExp(`PostgreSQL \\S+/${database} created database ${database};`));
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
      assert.equal(rowCount, 1, 'the database exists');

      const second = await services({ DATABASE_URL: url.toString() });
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stderr, new RegExp(`PostgreSQL \\S+/${database} ok;`), 'nothing to do the second time');
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS "${database}"`);
      await admin.end();
    }
  });

  test('a local AMQP_URL on a port the running node does not serve fails at once, naming the ports it does', async () => {
    // `rabbitmq-server -detached` answers "already running" (the shared node is up on its own port); the
    // wait that follows must end on the node's listeners, not run out SERVICES_WAIT_SECONDS.
    const closed = await freePort();
    const { code, stderr } = await services({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${closed}` });
    assert.equal(code, 1);
    assert.match(
      stderr,
      new RegExp(`RabbitMQ at \\S+: the local RabbitMQ node is running but accepts AMQP on [\\d, ]+, not on ${closed}`),
    );
    assert.doesNotMatch(stderr, /still not answering/);
  });

  test('fails naming the service and what to do when a remote one does not answer', async () => {
    // 192.0.2.0/24 is TEST-NET-1: remote by address, and nothing there answers on this machine.
    const { code, stderr } = await services({ AMQP_URL: 'amqp://guest:secret@192.0.2.1:1' });
    assert.equal(code, 1);
    assert.match(
      stderr,
      /RabbitMQ at amqp:\/\/guest:\*\*\*@192\.0\.2\.1:1: not answering \(.+\); start it, or point AMQP_URL/,
    );
    assert.doesNotMatch(stderr, /secret/, 'the password is redacted');
  });
});
