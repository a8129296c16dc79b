// test-files: session, terminates the consumer's backends found by application_name
/**
 * Connections lost and regained: an unreachable broker, a broker-side close, the ramp-up after it,
 * and database connections terminated while idle or mid-transaction.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import { silentLogger, startConsumer } from '../../src/index.js';
import { RampGate } from '../../src/inbox/ramp.js';
import { withEnv, envelope, applyOrder, gate, collect } from '../support/consumer-env.js';
import {
  describe,
  mock,
  test,
  DATABASE_URL,
  uniqueName,
  waitFor,
  connectionPidsNamed,
  closeConnection,
  connectPostgres,
} from '../support/rig.js';

describe('consumer reconnect and ramp-up', () => {
  test('an unreachable broker reports errors and stop() does not wait out the reconnect backoff', async () => {
    const consumer = startConsumer({
      queue: uniqueName('cvc.unreachable'),
      amqpUrl: 'amqp://guest:guest@127.0.0.1:1',
      connectionString: DATABASE_URL,
      handlers: { AmountAdded: async () => undefined },
      logger: silentLogger,
      // After the second failure the next attempt is half an hour away: stop() can only return
      // (within the test timeout) if it wakes that wait instead of sleeping it out.
      reconnectBackoff: { initialDelayMs: 10, maxDelayMs: 3_600_000, factor: 1_000_000 },
    });
    const errors: Error[] = [];
    consumer.on('error', (err) => errors.push(err));
    await waitFor(() => errors.length >= 2, 'two failed connection attempts');
    await consumer.stop();
    assert.equal(errors.length, 2, 'no further attempt: the long wait was cut short by stop(), not served');
    assert.ok(
      errors.every((err) => /ECONNREFUSED/.test(`${(err as { code?: string }).code} ${err.message}`)),
      errors.map(String).join('; '),
    );
  });

  test('reconnects after the broker closes its connection and keeps consuming', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      const errors: Error[] = [];
      consumer.on('error', (err) => errors.push(err));
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event before the cut');

        const name = `converge-consumer ${env.queue}`;
        const [pid, ...others] = await connectionPidsNamed(name);
        assert.ok(pid, 'the consumer connection is visible to the broker under its connection_name');
        assert.equal(others.length, 0);
        await closeConnection(pid, 'test');
        const fresh = await waitFor(async () => {
          const pids = await connectionPidsNamed(name);
          return pids.length === 1 && pids[0] !== pid ? pids[0] : undefined;
        }, 'a new consumer connection');
        assert.notEqual(fresh, pid);

        await env.publish(envelope('E2', 'o1', 2));
        await waitFor(() => consumer.stats.applied === 2, 'the event published after the reconnect');
        assert.equal((await env.checkQueue(env.queue)).consumerCount, 1, 'exactly one subscription after reconnecting');
        assert.deepEqual(errors, [], 'a broker-side close is not reported as a failure');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
    });
  });

  test('after the broker connection is lost, the backlog is processed at a rate that starts low (ramp-up)', async () => {
    await withEnv(async (env) => {
      // The ramp's clock is faked (performance.now), so the rate is checked against time the test
      // advances itself: never more than the burst plus 40/s of fake time, whatever the machine's load.
      let fakeNow = performance.now();
      mock.method(performance, 'now', () => fakeNow);
      let refusals = 0;
      // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the gate as `this` below
      const take = RampGate.prototype.take;
      mock.method(RampGate.prototype, 'take', function (this: RampGate, wanted: number) {
        const answer = take.call(this, wanted);
        if (answer.granted === 0) refusals++;
        return answer;
      });
      // A long step keeps the limit at its initial 40/s for the whole test.
      const consumer = env.start({
        handlers: { AmountAdded: applyOrder(env.schema) },
        rampUp: { initialPerSecond: 40, stepMs: 60_000 },
      });
      const limits: (number | null)[] = [];
      let recoveredAt = 0;
      let appliedAtRecovery = 0;
      consumer.on('recovering', (limit) => {
        limits.push(limit);
        recoveredAt = fakeNow;
        appliedAtRecovery = consumer.stats.applied;
      });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event, at full speed');
        assert.deepEqual(limits, [], 'no limit on the first connection');

        const name = `converge-consumer ${env.queue}`;
        const [pid] = await connectionPidsNamed(name);
        await closeConnection(pid!, 'test');
        for (let v = 2; v <= 81; v++) await env.publish(envelope(`E${v}`, `o${v}`, 1));
        await waitFor(() => limits.length > 0, 'the new session to begin the ramp');
        assert.deepEqual(limits, [40]);
        // Each round: wait until the gate refuses (the bucket is empty at this fake instant), check
        // the count so far against the rate, then let 100 ms of fake time pass (4 more tokens).
        while (consumer.stats.applied < 81) {
          const seen = refusals;
          await waitFor(
            () => refusals > seen || consumer.stats.applied === 81,
            'the gate to refuse, or the backlog to be done',
            30_000,
          );
          const seconds = (fakeNow - recoveredAt) / 1000;
          const since = consumer.stats.applied - appliedAtRecovery;
          assert.ok(
            since <= 4 + 40 * seconds,
            `${since} events after ${seconds.toFixed(2)} s of ramp time exceed 40/s with a burst of 4`,
          );
          fakeNow += 100;
        }
        const seconds = (fakeNow - 100 - recoveredAt) / 1000;
        const afterRecovery = 81 - appliedAtRecovery;
        // A token bucket at 40/s with a burst of 4 takes at least (n - 4) / 40 seconds for n events.
        assert.ok(afterRecovery >= 60, `most of the backlog came after the reconnect (${afterRecovery})`);
        assert.ok(
          seconds >= (afterRecovery - 4) / 40,
          `${afterRecovery} events in ${seconds.toFixed(2)} s exceed 40/s`,
        );
      } finally {
        mock.restoreAll();
        await env.stop(consumer);
      }
    });
  });

  test('terminated idle database connections do not lose the next delivery', async () => {
    await withEnv(async (env) => {
      const app = uniqueName('cvc_pg');
      const pool = await connectPostgres(3, { application_name: app });
      const poolErrors: Error[] = [];
      pool.on('error', (err) => poolErrors.push(err));
      const consumer = env.start({ pool, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the first event');
        const killed = await env.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
          [app],
        );
        assert.ok((killed.rowCount ?? 0) >= 1, 'the consumer had a backend to terminate');
        await waitFor(() => poolErrors.length >= 1, 'the pool to notice the dead connection');

        await env.publish(envelope('E2', 'o1', 2));
        await waitFor(() => consumer.stats.applied === 2, 'the next delivery to apply on a new connection');
        assert.equal(consumer.stats.quarantined, 0);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 2);
      } finally {
        await env.stop(consumer);
        await pool.end();
      }
    });
  });

  test('a database connection terminated mid-transaction leads to a retry, never a crash or a loss', async () => {
    await withEnv(async (env) => {
      const app = uniqueName('cvc_pg');
      const pool = await connectPostgres(3, { application_name: app });
      pool.on('error', () => undefined);
      const entered = gate();
      const release = gate();
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        pool,
        handlers: {
          AmountAdded: async (event, ctx) => {
            calls++;
            await apply(event, ctx);
            if (calls === 1) {
              entered.open();
              await release.promise; // e.g. awaiting an HTTP call while the database fails over
            }
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 2 }));
        await entered.promise;
        const killed = await env.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`,
          [app],
        );
        assert.equal(killed.rowCount, 1, "the consumer's open transaction was terminated");
        release.open();

        await waitFor(() => consumer.stats.applied === 1, 'the retried delivery to apply');
        const first = settled[0]!;
        assert.ok(first.action === 'retry' && first.reason === 'database-unavailable', JSON.stringify(first));
        assert.equal(calls, 2);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 2, 'applied exactly once');
        assert.equal(consumer.stats.quarantined, 0);
      } finally {
        release.open();
        await env.stop(consumer);
        await pool.end();
      }
    });
  });
});
