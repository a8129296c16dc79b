/** The CLI with several schemas (docs/tenants.md): `relay --schema a,b` in one process, `status --schema a,b`, and a command that takes one schema refusing a list. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { cli, runCli } from '../support/cli.js';
import { appendManyToOutbox, migrate, withTransaction } from '../../src/index.js';
import {
  test,
  connectPostgres,
  connectRabbit,
  connectionPidsNamed,
  registry,
  uniqueName,
  waitFor,
} from '../support/rig.js';

test('relay --schema a,b publishes each schema to its own exchange on one broker connection; status --schema a,b reports each', async () => {
  const pool = await connectPostgres(2);
  const connection = await connectRabbit();
  const channel = await connection.createChannel();
  const schemas = [uniqueName('cvt_cli_tn'), uniqueName('cvt_cli_tn')] as const;
  const prefix = uniqueName('cvt.cli.tn');
  const appended = new Map<string, string[]>();
  try {
    for (const schema of schemas) {
      registry.name(`${prefix}.${schema}`);
      await migrate(pool, { schema });
      await channel.assertExchange(`${prefix}.${schema}`, 'topic', { durable: true });
      await channel.assertQueue(`${prefix}.${schema}`, { durable: true });
      await channel.bindQueue(`${prefix}.${schema}`, `${prefix}.${schema}`, '#');
      const events = [1, 2].map((version) => ({
        aggregateType: 'order',
        aggregateId: 'o-1',
        aggregateVersion: version,
        eventType: 'OrderChanged',
        payload: {},
      }));
      const ids = await withTransaction(pool, (tx) => appendManyToOutbox(tx, events, { schema }));
      appended.set(
        schema,
        ids.map((e) => e.eventId),
      );
    }
    const list = schemas.join(',');
    const refused = await cli(['--schema', list, 'gaps']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /CONVERGE_INVALID_CONFIG: invalid option "schema": names several schemas/);

    const relay = runCli(['--schema', list, 'relay', '--exchange', prefix, '--poll-ms', '20']);
    let stderr = '';
    relay.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await waitFor(async () => {
      for (const schema of schemas) {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".outbox WHERE status = 'published'`,
        );
        if (rows[0]!.n !== 2) return false;
      }
      return true;
    }, 'the CLI relays to publish both schemas');
    // The process's one connection, named after its host and pid (startTenants' default name).
    const brokerConnections = (await connectionPidsNamed(`converge-tenants ${hostname()}:${relay.pid}`)).length;
    relay.kill('SIGTERM');
    const [code] = (await once(relay, 'exit')) as [number | null];
    assert.equal(code, 0, stderr);
    assert.equal(brokerConnections, 1, 'both relays on one broker connection');
    for (const schema of schemas) {
      const received: string[] = [];
      for (
        let message = await channel.get(`${prefix}.${schema}`);
        message;
        message = await channel.get(`${prefix}.${schema}`)
      )
        received.push(message.properties.messageId as string);
      assert.deepEqual(received.sort(), [...appended.get(schema)!].sort(), `${schema} received only its own events`);
    }

    const status = await cli(['--schema', list, 'status', '--json', '--sample-ms', '0']);
    assert.equal(status.code, 0, status.stderr);
    const parsed = JSON.parse(status.stdout) as { schemas: Record<string, { outbox: { pending: number } }> };
    assert.deepEqual(Object.keys(parsed.schemas), [...schemas]);
    for (const schema of schemas) assert.equal(parsed.schemas[schema]!.outbox.pending, 0);
    const table = await cli(['--schema', list, 'status', '--sample-ms', '0']);
    assert.equal(table.code, 0, table.stderr);
    for (const schema of schemas) assert.match(table.stdout, new RegExp(`^schema ${schema}$`, 'm'));
  } finally {
    await channel.close();
    await connection.close();
    await pool.end();
  }
});
