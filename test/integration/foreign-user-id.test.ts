/**
 * A message another RabbitMQ user published with its own `user-id` (which the broker checked) must
 * not stop the consumer's retries. RabbitMQ closes a channel that publishes a `user-id` other than
 * its connection's login (406), so a retry copy that kept it closed the consumer's retry channel,
 * and every later copy, of any message, failed until the session ended (issue 26).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Settlement } from '../../src/index.js';
import { AMQP_URL, describe, orderEvent, rabbitmqctl, test, uniqueName, waitFor } from '../support/rig.js';
import { withBadInputRig } from '../support/badinput-rig.js';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** A RabbitMQ user of the test's own with every permission on the default vhost, deleted afterwards. */
async function withBrokerUser(fn: (url: string) => Promise<void>): Promise<void> {
  const user = uniqueName('cvuid');
  const password = randomBytes(12).toString('hex');
  await rabbitmqctl(['add_user', user, password]);
  try {
    await rabbitmqctl(['set_permissions', '-p', '/', user, '.*', '.*', '.*']);
    const url = new URL(AMQP_URL);
    url.username = user;
    url.password = password;
    await fn(url.toString());
  } finally {
    await rabbitmqctl(['delete_user', user]);
  }
}

describe('a user-id the consumer cannot publish', () => {
  test('retry copies leave out a foreign user-id; retries count and end in quarantine, for every message', async () => {
    await withBrokerUser(async (consumerUrl) => {
      await withBadInputRig('cvuid', async ({ db, publish, start }) => {
        const calls = new Map<string, number>();
        const settled: Settlement[] = [];
        // U-1 always fails: three attempts, then quarantine. U-2 fails twice, then applies.
        const consumer = start({
          amqpUrl: consumerUrl,
          maxAttempts: 3,
          // One delivery per transaction: a failed batch runs each of its deliveries again on its own
          // (processor.ts), so two copies landing together would count one attempt twice.
          batchSize: 1,
          handlers: {
            AmountAdded: async (event) => {
              const n = (calls.get(event.eventId) ?? 0) + 1;
              calls.set(event.eventId, n);
              if (event.eventId === 'U-1' || n < 3) throw new Error(`attempt ${n} fails`);
            },
          },
        });
        consumer.on('settled', (s) => settled.push(s));
        await consumer.ready();
        // The rig publishes as the broker's default user: its user-id is valid there, not on the consumer's connection.
        const publisher = new URL(AMQP_URL).username || 'guest';
        await publish('foreign-user-id', json(orderEvent('U-1', 'u-1')), { userId: publisher });
        await publish('plain', json(orderEvent('U-2', 'u-2')));
        const final = await waitFor(() => {
          const done = settled.filter((s) => s.action === 'ack');
          return done.length === 2 ? done : false;
        }, 'U-1 quarantined after its attempts and U-2 applied');
        const outcome = (id: string) => final.find((s) => s.eventId === id);
        assert.deepEqual(
          [outcome('U-1')?.outcome, outcome('U-2')?.outcome],
          ['quarantined', 'applied'],
          JSON.stringify(final),
        );
        assert.deepEqual(
          Object.fromEntries(calls),
          { 'U-1': 3, 'U-2': 3 },
          'each attempt ran once, counted by the copies',
        );
        // The row keeps the last copy's properties: without the user-id, which the copy names as left out.
        const { rows } = await db.pool.query<{ marker: unknown; user: boolean }>(
          `SELECT properties->'headers'->'x-converge-properties-omitted' AS marker, properties ? 'userId' AS user
             FROM "${db.schema}".quarantine`,
        );
        assert.deepEqual(rows, [{ marker: ['userId'], user: false }]);
      });
    });
  });
});
