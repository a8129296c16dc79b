// test-files: session, kills the relay's backends by application_name and waits on LISTEN/NOTIFY wake-ups
/** The relay's tests that need PostgreSQL sessions of its own: its backends killed, LISTEN/NOTIFY wake-ups. */
import assert from 'node:assert/strict';
import { describe, it, uniqueName, waitFor, connectionPids, closeConnection, connectPostgres } from '../support/rig.js';
import { backendPids, event, withRig } from '../support/relay-rig.js';

describe('relay: sessions', () => {
  it('keeps publishing after its PostgreSQL backend is killed and its AMQP connection is closed by the broker', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      const applicationName = uniqueName('cvt_relay_app');
      const pool = await connectPostgres(2, { application_name: applicationName });
      pool.on('error', () => undefined);
      rig.pools.push(pool);
      const relayId = uniqueName('relay_reconnect');
      const errors: Error[] = [];
      const relay = rig.started({ pool, relayId, reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 200 } });
      relay.on('error', (err) => errors.push(err));

      const received = new Set<string>();
      const appended: string[] = [];
      const expectAll = async (description: string) => {
        await waitFor(async () => {
          for (const m of await rig.drain(queue)) received.add(m.properties.messageId as string);
          return appended.every((id) => received.has(id));
        }, description);
        await waitFor(
          async () => (await rig.rows()).every((row) => row.status === 'published'),
          `${description}: rows marked`,
        );
      };
      let version = 0;
      const appendOne = async () => appended.push(...(await rig.append(event('o-1', ++version))));

      await appendOne();
      await expectAll('first event');

      // PostgreSQL: kill the relay's backends.
      const oldPids = await backendPids(rig.db.pool, applicationName);
      assert.ok(oldPids.length > 0, 'the relay holds a backend');
      const { rows: killed } = await rig.db.pool.query<{ ok: boolean }>(
        'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      assert.ok(killed.length > 0 && killed.every((row) => row.ok));
      await appendOne();
      await appendOne();
      await expectAll('events after the database backend was killed');
      const newPids = await backendPids(rig.db.pool, applicationName);
      assert.ok(newPids.length > 0 && newPids.every((pid) => !oldPids.includes(pid)), 'the relay runs on new backends');

      // RabbitMQ: the broker closes the relay's connection.
      const [oldConnection, ...others] = await connectionPids(relayId);
      assert.ok(oldConnection, `a broker connection named "converge-relay ${relayId}"`);
      assert.equal(others.length, 0);
      await closeConnection(oldConnection, 'converge relay test');
      await appendOne();
      await appendOne();
      await expectAll('events after the broker closed the connection');
      const reconnected = await connectionPids(relayId);
      assert.equal(reconnected.length, 1);
      assert.notEqual(reconnected[0], oldConnection);

      await appendOne();
      await expectAll('events after both reconnects');
      assert.equal(appended.length, 6);
      assert.deepEqual(
        (await rig.rows()).map((row) => row.status),
        Array(6).fill('published'),
      );
    });
  });

  it('wakes on NOTIFY from an outbox insert instead of waiting for the poll interval', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('#');
      // A poll interval far beyond the wait below: only the NOTIFY can make the relay look again.
      const relay = rig.started({ pollIntervalMs: 120_000, concurrency: 1 });
      const idle = new Promise<void>((resolve) => relay.once('idle', resolve));
      await rig.append(event('n-0', 1));
      await waitFor(
        async () => (await rig.rows()).every((row) => row.status === 'published'),
        'the first event to be published',
      );
      await idle;
      const [id] = await rig.append(event('n-1', 1));
      await waitFor(
        async () => (await rig.row(id!)).status === 'published',
        'the event appended while idle to be published',
        10_000,
      );
      assert.equal((await rig.drain(queue)).length, 2);
    });
  });
});
