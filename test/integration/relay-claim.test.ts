// test-files: session, claim 'exclusive' holds a session advisory lock on one connection
/**
 * The relay's two ways to claim rows (src/relay/claim.ts): `lease` writes each claim into the row,
 * `exclusive` holds the schema's relay lock and claims by reading. These tests are about the
 * exclusive one: one row write per event, one holder at a time, standbys taking over, and what
 * happens to events in flight when the lock's connection goes.
 */
import assert from 'node:assert/strict';
import pg from 'pg';
import client from 'prom-client';
import { instrumentRelay } from '../../src/metrics/index.js';
import { Relay, type RelayOptions } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { parseEnvelope } from '../../src/internal/index.js';
import { describe, it, DATABASE_URL, waitFor } from '../support/rig.js';
import { event, withRig, type Rig } from '../support/relay-rig.js';

const EXCLUSIVE: RelayOptions = { claim: 'exclusive', standbyRetryMs: 20 };

/** Counts the UPDATEs each outbox row receives, by a trigger in the test's own schema. */
async function countUpdates(rig: Rig): Promise<() => Promise<Map<string, number>>> {
  await rig.db.pool.query(`
    CREATE TABLE "${rig.schema}".outbox_updates (position bigint PRIMARY KEY, updates int NOT NULL);
    CREATE FUNCTION "${rig.schema}".count_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO "${rig.schema}".outbox_updates VALUES (NEW.position, 1)
        ON CONFLICT (position) DO UPDATE SET updates = outbox_updates.updates + 1;
      RETURN NEW;
    END $$;
    CREATE TRIGGER count_update BEFORE UPDATE ON ${rig.outbox}
      FOR EACH ROW EXECUTE FUNCTION "${rig.schema}".count_update();`);
  return async () => {
    const { rows } = await rig.db.pool.query<{ position: string; updates: number }>(
      `SELECT position, updates FROM "${rig.schema}".outbox_updates`,
    );
    return new Map(rows.map((row) => [row.position, row.updates]));
  };
}

/** The backend holding this schema's relay lock, if any. */
async function lockHolder(rig: Rig): Promise<number | undefined> {
  const { rows } = await rig.db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 2
        AND classid = (hashtext('converge.relay')::bigint & 4294967295)::oid
        AND objid = to_regnamespace($1)::oid`,
    [rig.schema],
  );
  return rows[0]?.pid;
}

function once(relay: Relay, name: 'active' | 'standby'): Promise<void> {
  return new Promise((resolve) => relay.once(name, () => resolve()));
}

async function allPublished(rig: Rig, count: number): Promise<void> {
  await waitFor(async () => {
    const rows = await rig.rows();
    return rows.length === count && rows.every((row) => row.status === 'published');
  }, `all ${count} outbox rows published`);
}

/** Versions per aggregate in the order the queue holds them. */
function versionsByAggregate(bodies: Buffer[]): Map<string, number[]> {
  const seen = new Map<string, number[]>();
  for (const body of bodies) {
    const envelope = parseEnvelope(body);
    seen.set(envelope.aggregateId, [...(seen.get(envelope.aggregateId) ?? []), envelope.aggregateVersion]);
  }
  return seen;
}

describe('relay claim: exclusive', () => {
  it('publishes each aggregate in version order with one row write per event, where a lease relay writes two', async () => {
    await withRig(async (rig) => {
      const updates = await countUpdates(rig);
      const queue = await rig.queue('order.#');
      const events = Array.from({ length: 10 }, (_, v) =>
        Array.from({ length: 20 }, (_, a) => event(`o-${a}`, v + 1)),
      ).flat();
      await rig.append(...events);
      const exclusive = rig.started({ ...EXCLUSIVE, batchSize: 7 });
      await allPublished(rig, events.length);
      await exclusive.stop();

      const perRow = await updates();
      assert.equal(perRow.size, events.length);
      assert.deepEqual(new Set(perRow.values()), new Set([1]), 'each row written once, by its mark');
      const byAggregate = versionsByAggregate((await rig.drain(queue)).map((m) => m.content));
      assert.equal(byAggregate.size, 20);
      for (const [aggregateId, versions] of byAggregate)
        assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], `versions of ${aggregateId} in order`);

      // The same backlog through a lease relay: the claim is a second write of every row.
      await rig.append(...Array.from({ length: 20 }, (_, a) => event(`o-${a}`, 11)));
      const leaseRelay = rig.relay();
      await leaseRelay.runOnce();
      const afterLease = await updates();
      const leaseWrites = [...afterLease].filter(([position]) => !perRow.has(position)).map(([, n]) => n);
      assert.deepEqual(leaseWrites, new Array(20).fill(2));
    });
  });

  it('lets one relay publish while another waits as standby, which takes over when the first stops', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('order.#');
      const first = rig.relay(EXCLUSIVE);
      const second = rig.relay(EXCLUSIVE);
      const registries = [new client.Registry(), new client.Registry()];
      instrumentRelay(first, registries[0]!);
      instrumentRelay(second, registries[1]!);
      const firstActive = once(first, 'active');
      first.start();
      await firstActive;
      const active = async () => {
        const values = await Promise.all(
          registries.map(
            async (registry) => (await registry.getSingleMetric('converge_relay_active')?.get())?.values[0]?.value,
          ),
        );
        return values;
      };
      const standby = once(second, 'standby');
      const taken = once(second, 'active');
      let secondPublished = 0;
      second.on('published', (ids) => (secondPublished += ids.length));
      second.start();
      await standby;
      assert.deepEqual(await active(), [1, 0]);

      await rig.append(event('o-1', 1), event('o-2', 1));
      await allPublished(rig, 2);
      assert.equal(secondPublished, 0, 'a standby publishes nothing');

      await first.stop();
      await taken;
      assert.equal((await active())[1], 1);
      await rig.append(event('o-1', 2), event('o-2', 2));
      await allPublished(rig, 4);
      assert.equal(secondPublished, 2);
      assert.equal((await rig.drain(queue)).length, 4);
    });
  });

  it('stops claiming when the connection holding the lock is terminated, and loses nothing', async () => {
    await withRig(async (rig) => {
      await rig.queue('order.#');
      const relays = [rig.started(EXCLUSIVE), rig.started(EXCLUSIVE)];
      const holder = await waitFor(() => lockHolder(rig), 'a relay holding the lock');
      await rig.append(...Array.from({ length: 50 }, (_, i) => event(`o-${i % 5}`, Math.floor(i / 5) + 1)));
      await rig.db.pool.query('SELECT pg_terminate_backend($1)', [holder]);
      await rig.append(...Array.from({ length: 5 }, (_, i) => event(`o-${i}`, 11)));

      await allPublished(rig, 55);
      const next = await waitFor(() => lockHolder(rig), 'the lock held again');
      assert.notEqual(next, holder);
      assert.equal(relays.filter((relay) => relay.failure !== undefined).length, 0);
    });
  });

  it('loses the lock to a standby once its lock session sat idle for leaseMs (a holder cut off from the server)', async () => {
    await withRig(async (rig) => {
      await rig.queue('order.#');
      const stuck = rig.gate();
      const options: RelayOptions = { ...EXCLUSIVE, concurrency: 1, leaseMs: 1_500, confirmTimeoutMs: 1_000 };
      // Its only batch never gets marked, so it never claims again and its lock session goes quiet.
      const holder = rig.relay({ ...options, hooks: { afterConfirm: () => stuck.released } });
      const holding = once(holder, 'active');
      holder.start();
      await holding;
      const standby = rig.relay(options);
      let tookOver = false;
      standby.once('active', () => (tookOver = true));
      standby.start();
      await rig.append(event('o-1', 1));
      await waitFor(() => tookOver, 'the standby to take the lock of the quiet holder');
      await allPublished(rig, 1);
      stuck.release();
    });
  });

  it('publishes a confirmed event again when its mark did not happen (a duplicate, never a loss)', async () => {
    await withRig(async (rig) => {
      const queue = await rig.queue('order.#');
      const ids = await rig.append(event('o-1', 1), event('o-2', 1));
      let failOnce = true;
      const relay = rig.relay({
        ...EXCLUSIVE,
        hooks: {
          afterConfirm: () => {
            if (!failOnce) return;
            failOnce = false;
            throw new Error('crash between confirm and mark');
          },
        },
      });
      await assert.rejects(relay.runOnce(), /crash between confirm and mark/);
      assert.deepEqual(
        (await rig.rows()).map((row) => row.status),
        ['pending', 'pending'],
      );
      const again = await relay.runOnce();
      assert.equal(again.published, 2);
      const delivered = (await rig.drain(queue)).map((m) => parseEnvelope(m.content).eventId);
      assert.deepEqual(delivered.sort(), [...ids, ...ids].sort());
    });
  });

  it('reschedules and fails returned events although it wrote no claim', async () => {
    await withRig(async (rig) => {
      await rig.declareExchange();
      const [id] = await rig.append(event('o-1', 1));
      const relay = rig.relay({ ...EXCLUSIVE, maxAttempts: 2 });
      const first = await relay.runOnce();
      assert.equal(first.retried, 1);
      const retried = await rig.row(id!);
      assert.equal(retried.status, 'pending');
      assert.equal(retried.attempts, 1);
      assert.match(retried.last_error ?? '', /return|unroutable/i);
      await rig.db.pool.query(`UPDATE ${rig.outbox} SET next_attempt_at = now()`);
      const second = await relay.runOnce();
      assert.equal(second.failed, 1);
      assert.equal((await rig.row(id!)).status, 'failed');
    });
  });

  it('gives the lock back when it stops, also on a pool that stays open', async () => {
    await withRig(async (rig) => {
      await rig.queue('order.#');
      const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
      rig.pools.push(pool);
      const relay = rig.started({ ...EXCLUSIVE, pool, connectionString: undefined });
      await once(relay, 'active');
      assert.notEqual(await lockHolder(rig), undefined);
      await relay.stop();
      assert.equal(await lockHolder(rig), undefined);
      assert.ok(pool.totalCount > 0, 'the pool keeps its connections');
    });
  });

  it('leaves no error listener behind on the pooled connection it tries the lock with, as standby or after stop', async () => {
    await withRig(async (rig) => {
      await rig.queue('order.#');
      const holder = rig.started(EXCLUSIVE);
      await once(holder, 'active');
      // One connection: each try of the standby checks out the same client.
      const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
      rig.pools.push(pool);
      const errorListeners = async () => {
        const client = await pool.connect();
        const n = client.listenerCount('error');
        client.release();
        return n;
      };
      const standby = rig.relay({ ...EXCLUSIVE, pool, connectionString: undefined });
      await standby.runOnce();
      const afterOneTry = await errorListeners();
      for (let i = 0; i < 12; i++) await standby.runOnce();
      assert.equal(await errorListeners(), afterOneTry, 'a standby try adds no listener');

      await holder.stop();
      await standby.runOnce();
      assert.notEqual(await lockHolder(rig), undefined, 'the standby took the lock');
      await standby.stop();
      assert.equal(await errorListeners(), afterOneTry, 'giving the lock back removes its listener');
    });
  });

  it('rejects a lease no longer than a poll or a confirm wait with claim exclusive, naming leaseMs', () => {
    assert.throws(
      () =>
        new Relay({
          connectionString: DATABASE_URL,
          amqpUrl: 'amqp://127.0.0.1',
          claim: 'exclusive',
          leaseMs: 5_000,
          confirmTimeoutMs: 5_000,
        }),
      (err: unknown) => err instanceof ConfigError && err.field === 'leaseMs',
    );
  });

  it('rejects an unknown claim mode, naming the option', () => {
    assert.throws(
      () => new Relay({ connectionString: DATABASE_URL, amqpUrl: 'amqp://127.0.0.1', claim: 'shared' as 'lease' }),
      (err: unknown) => err instanceof ConfigError && err.field === 'claim',
    );
  });
});
