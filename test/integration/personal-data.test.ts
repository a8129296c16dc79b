// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
/**
 * Personal data against the real services: the producer writes only the fields its schema
 * declares (a strict schema refuses the event instead, writing nothing), every event records the
 * paths its catalog marks sensitive, the relay sends them on, and the quarantine displays (dlq
 * show, the dashboard's API) mask them unless `--show-sensitive` asks; no log line of the relay,
 * the failing consumer or the dashboard carries them.
 */
import assert from 'node:assert/strict';
import { z } from 'zod';
import { appendManyToOutbox, appendToOutbox, defineEvents, withTransaction } from '../../src/index.js';
import { PayloadValidationError } from '../../src/errors.js';
import { runAction, type ApiContext } from '../../src/dashboard/api.js';
import { listQuarantine } from '../../src/ops/index.js';
import { capturingLogger } from '../support/consumer-env.js';
import { withBrokerFixture } from '../support/broker-fixture.js';
import { cli } from '../support/cli.js';
import { withCdcRig } from '../support/cdc-fixture.js';
import { createTestSchema, describe, test, waitFor } from '../support/rig.js';

const EMAIL = 'ada.lovelace@example.com';
const STREET = 'Secret Street 12';
const PHONE = '+41 79 000 00 00';

const customerEvents = defineEvents(
  {
    // zod's default object: keys it does not declare are stripped.
    CustomerRegistered: z.object({
      customerId: z.string(),
      email: z.string(),
      address: z.object({ street: z.string(), city: z.string() }),
    }),
    // A strict object: an undeclared key fails the event.
    CustomerRenamed: z.strictObject({ customerId: z.string(), name: z.string() }),
  },
  { sensitive: { CustomerRegistered: ['email', 'address.street'] } },
);

const customer = (aggregateVersion: number) => ({ aggregateType: 'customer', aggregateId: 'c1', aggregateVersion });
const registered = {
  ...customer(1),
  eventType: 'CustomerRegistered' as const,
  // A JavaScript caller (or a spread of a whole form) gets undeclared fields past the compiler.
  payload: {
    customerId: 'c1',
    email: EMAIL,
    address: { street: STREET, city: 'London', phone: PHONE },
    phone: PHONE,
  } as { customerId: string; email: string; address: { street: string; city: string } },
};

describe('personal data at the producer', () => {
  test('undeclared fields never reach the outbox row; a strict schema throws and writes nothing', async () => {
    const db = await createTestSchema('cvt_pii');
    try {
      const options = { schema: db.schema, events: customerEvents };
      await withTransaction(db.pool, (tx) => appendToOutbox(tx, registered, options));
      await withTransaction(db.pool, (tx) =>
        appendManyToOutbox(
          tx,
          [
            { ...registered, ...customer(2) },
            { ...customer(3), eventType: 'CustomerRenamed', payload: { customerId: 'c1', name: 'Ada' } },
          ],
          options,
        ),
      );
      const failure = await withTransaction(db.pool, (tx) =>
        appendToOutbox(
          tx,
          {
            ...customer(4),
            eventType: 'CustomerRenamed',
            payload: { customerId: 'c1', name: 'Ada', phone: PHONE } as { customerId: string; name: string },
          },
          options,
        ),
      ).then(
        () => assert.fail('expected PayloadValidationError'),
        (err: unknown) => err,
      );
      assert.ok(failure instanceof PayloadValidationError);
      assert.ok(!failure.message.includes(PHONE), failure.message);

      const { rows } = await db.pool.query<{ aggregate_version: string; payload: unknown; sensitive_fields: string }>(
        `SELECT aggregate_version, payload, sensitive_fields FROM "${db.schema}".outbox ORDER BY position`,
      );
      const declared = { customerId: 'c1', email: EMAIL, address: { street: STREET, city: 'London' } };
      assert.deepEqual(rows, [
        { aggregate_version: '1', payload: declared, sensitive_fields: 'email,address.street' },
        { aggregate_version: '2', payload: declared, sensitive_fields: 'email,address.street' },
        { aggregate_version: '3', payload: { customerId: 'c1', name: 'Ada' }, sensitive_fields: '' },
      ]);
      const raw = await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM "${db.schema}".outbox WHERE payload::text LIKE '%' || $1 || '%'`,
        [PHONE],
      );
      assert.equal(raw.rows[0]!.n, '0', 'the undeclared phone is in no row');
    } finally {
      await db.close();
    }
  });
});

describe('personal data in the quarantine', () => {
  test('dlq show and the dashboard mask the sensitive fields, --show-sensitive shows them, no log has them', () =>
    withBrokerFixture('cvt_pii', async ({ db, startConsumer, startRelay, consumerOptions }) => {
      const logger = capturingLogger();
      const consumer = startConsumer({
        logger,
        events: customerEvents,
        maxAttempts: 2,
        backoff: { initialDelayMs: 10, maxDelayMs: 20 },
        handlers: {
          // A plain error quoting the payload: retried, then quarantined with this message as its detail.
          CustomerRegistered: async (event) => {
            throw new Error(`no mailbox for ${event.payload.email} at ${event.payload.address.street}`);
          },
          CustomerRenamed: async () => undefined,
        },
      });
      await consumer.ready();
      startRelay({ logger });
      await withTransaction(db.pool, (tx) =>
        appendToOutbox(tx, registered, { schema: db.schema, events: customerEvents }),
      );
      await waitFor(() => consumer.stats.quarantined === 1, 'the registration quarantined');

      const [row] = await listQuarantine(db.pool, { schema: db.schema });
      assert.ok(row);
      assert.match(row.detail, /no mailbox for \[redacted\] at \[redacted\]/, 'the stored detail is scrubbed');

      const shown = await cli(['--schema', db.schema, 'dlq', 'show', row.id, '--body']);
      assert.equal(shown.code, 0, shown.stderr);
      const display = JSON.parse(shown.stdout) as { body: string; masking: string; sensitivePaths: string[] };
      assert.deepEqual([display.masking, display.sensitivePaths], ['paths', ['email', 'address.street']]);
      assert.deepEqual((JSON.parse(display.body) as { payload: unknown }).payload, {
        customerId: 'c1',
        email: '[redacted]',
        address: { street: '[redacted]', city: 'London' },
      });
      for (const secret of [EMAIL, STREET, PHONE]) assert.ok(!shown.stdout.includes(secret), secret);

      const revealed = await cli(['--schema', db.schema, 'dlq', 'show', row.id, '--show-sensitive']);
      assert.equal(revealed.code, 0, revealed.stderr);
      assert.ok(revealed.stdout.includes(EMAIL) && revealed.stdout.includes(STREET), 'shown when asked for');
      assert.ok(!revealed.stdout.includes(PHONE), 'the undeclared phone was never written anywhere');

      const context = { pool: db.pool, schema: db.schema, logger, queues: [] } as unknown as ApiContext;
      const api = await runAction(context, 'show', row.id, {});
      assert.equal(api.status, 200);
      const apiText = JSON.stringify(api.body);
      assert.match(apiText, /\[redacted\]/);
      for (const secret of [EMAIL, STREET]) assert.ok(!apiText.includes(secret), `dashboard API: ${secret}`);

      assert.ok(logger.records.length > 0, 'the consumer and the relay did log');
      const logged = logger.records.join('\n');
      for (const secret of [EMAIL, STREET, PHONE]) assert.ok(!logged.includes(secret), `log: ${secret}`);
      assert.equal(consumerOptions({}).queue, row.consumer);
    }));
});

describe('personal data through the CDC relay', () => {
  test('the streamed row carries its sensitive paths as the header, without the undeclared field', () =>
    withCdcRig(async (rig) => {
      const relay = rig.started();
      await waitFor(() => relay.state === 'active', 'the relay to hold the slot');
      await withTransaction(rig.pool, (tx) =>
        appendToOutbox(tx, registered, { schema: rig.schema, events: customerEvents }),
      );
      await waitFor(() => rig.received.length === 1, 'the registration received');
      const [message] = rig.received;
      assert.equal(message!.properties.headers?.['x-converge-sensitive'], 'email,address.street');
      assert.ok(!message!.content.toString('utf8').includes(PHONE));
    }));
});
