// test-files: session, asserts on the statements prepared by name on its connection (pg_prepared_statements)
import assert from 'node:assert/strict';
import { usePreparedStatements } from '../../src/index.js';
import { runStatement } from '../../src/db/statement.js';
import { after, describe, it, connectPostgres } from '../support/rig.js';

const pool = await connectPostgres(1);
after(() => pool.end());

async function preparedOnConnection(client: {
  query: (text: string) => Promise<{ rows: { name: string }[] }>;
}): Promise<string[]> {
  const { rows } = await client.query(`SELECT name FROM pg_prepared_statements WHERE name LIKE 'converge_%'`);
  return rows.map((row) => row.name);
}

describe('runStatement', () => {
  it('runs a converge statement as a named, server-side prepared statement on a node-postgres client, once per text', async () => {
    const client = await pool.connect();
    try {
      const text = `SELECT $1::int + 1 AS n /* ${Math.random()} */`;
      const first = await runStatement<{ n: number }>(client, text, [1]);
      const second = await runStatement<{ n: number }>(client, text, [41]);
      assert.deepEqual([first.rows[0]!.n, second.rows[0]!.n], [2, 42]);
      const other = `SELECT $1::int + 2 AS n /* ${Math.random()} */`;
      await runStatement(client, other, [1]);
      assert.equal((await preparedOnConnection(client)).length, 2, 'one prepared statement per distinct text');
    } finally {
      client.release(true);
    }
  });

  it('passes plain text to an executor that is not node-postgres, and to every executor once turned off', async () => {
    const seen: unknown[] = [];
    const adapter = {
      query: async (text: string, values?: unknown[]) => (seen.push([text, values]), { rows: [], rowCount: 0 }),
    };
    await runStatement(adapter, 'SELECT 1', []);
    assert.deepEqual(seen, [['SELECT 1', []]]);

    usePreparedStatements(false);
    const client = await pool.connect();
    try {
      await runStatement(client, `SELECT $1::int AS n /* ${Math.random()} */`, [1]);
      assert.deepEqual(await preparedOnConnection(client), []);
    } finally {
      usePreparedStatements(true);
      client.release(true);
    }
  });
});
