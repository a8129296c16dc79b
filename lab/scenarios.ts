/**
 * The article's six experiments, each against a real PostgreSQL and a broker (RabbitMQ or the
 * in-process transport, the same checks on both) in an environment of its own. A scenario
 * returns what it checked; a failed check throws.
 */
import {
  Relay,
  repairFromSnapshot,
  silentLogger,
  startConsumer,
  withTransaction,
  type Settlement,
} from '../src/index.js';
import { ConcurrencyConflictError, ContentConflictError } from '../src/errors.js';
import { DeliveryProcessor } from '../src/internal/index.js';
import {
  PROJECTION,
  addToOrder,
  createOrder,
  orderRow,
  check,
  count,
  createLabEnv,
  envelopeFor,
  getOne,
  projectionRow,
  publishEnvelope,
  labRolesFromEnv,
  waitUntil,
  type LabEnv,
  type LabRoles,
} from './harness.js';
import type { LabTransportKind } from './broker.js';

export interface ScenarioResult {
  checks: string[];
  summary?: string;
}

export interface Scenario {
  id: number;
  title: string;
  run(env: LabEnv): Promise<ScenarioResult>;
}

const fastRetry = { initialDelayMs: 50, maxDelayMs: 200, factor: 2 };

export const sourceRollback: Scenario = {
  id: 1,
  title: 'source transaction rollback',
  async run(env) {
    const checks: string[] = [];
    await createOrder(env, '1');
    const failed = await addToOrder(env, { orderId: '1', delta: 10, failBeforeCommit: true }).catch(
      (err: Error) => err,
    );
    check(checks, failed instanceof Error, 'the failing source transaction (update and outbox append) threw');
    const unchanged = await orderRow(env, '1');
    check(
      checks,
      unchanged?.version === 0 && unchanged.amount === 0,
      'the existing order stays at version 0, amount 0',
      unchanged,
    );
    check(checks, (await count(env, `SELECT count(*) AS n FROM $schema.outbox`)) === 0, 'no outbox row after rollback');
    // A lost race: both read version 0, the winner committed version 1 first. The loser's
    // conditional update changes no row, so updateExactlyOne throws before its append and the
    // whole transaction rolls back.
    await addToOrder(env, { orderId: '1', delta: 10 });
    const lost = await addToOrder(env, { orderId: '1', delta: 5, readVersion: 0 }).catch((err: unknown) => err);
    check(
      checks,
      lost instanceof ConcurrencyConflictError,
      'the stale conditional update is rejected by updateExactlyOne (0 rows changed)',
    );
    const afterRace = await orderRow(env, '1');
    check(
      checks,
      afterRace?.version === 1 && afterRace.amount === 10,
      'the loser left the order as the winner wrote it: version 1, amount 10',
      afterRace,
    );
    const events = await env.pool.query<{ aggregate_version: string }>(
      `SELECT aggregate_version FROM "${env.schema}".outbox WHERE aggregate_id = '1'`,
    );
    check(
      checks,
      events.rows.length === 1 && Number(events.rows[0]!.aggregate_version) === 1,
      "the loser left no outbox row: only the winner's event (version 1)",
      events.rows,
    );
    return { checks };
  },
};

export const consumerRollback: Scenario = {
  id: 2,
  title: 'consumer transaction rollback',
  async run(env) {
    const checks: string[] = [];
    const warnings: string[] = [];
    let calls = 0;
    const handlers = {
      AmountAdded: async (...args: Parameters<NonNullable<typeof env.handlers.AmountAdded>>) => {
        calls++;
        await env.handlers.AmountAdded!(...args);
        if (calls === 1) throw new Error('simulated handler failure after the inbox insert and projection write');
      },
    };
    const consumer = startConsumer({
      transport: env.transport,
      queue: env.queue,
      exchange: env.exchange,
      declare: false,
      pool: env.pools.consumer,
      schema: env.schema,
      handlers,
      // Warnings only: the one this scenario must not see is a retry copy the broker would not take.
      logger: { ...silentLogger, warn: (_fields: object, message: string) => void warnings.push(message) },
      backoff: fastRetry,
    });
    const relay = new Relay({
      declareExchange: false,
      transport: env.transport,
      pool: env.pools.relay,
      schema: env.schema,
      exchange: env.exchange,
      logger: silentLogger,
      pollIntervalMs: 20,
    }).start();
    try {
      await consumer.ready();
      const firstRetry = new Promise<void>((resolve) =>
        consumer.on('settled', (s: Settlement) => s.action === 'retry' && resolve()),
      );
      await createOrder(env, '1');
      const { eventId } = await addToOrder(env, { orderId: '1', delta: 10 });
      await firstRetry;
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.inbox WHERE event_id = $1`, [eventId])) === 0,
        'after the failed attempt: no inbox row',
      );
      check(checks, (await projectionRow(env, '1')) === null, 'after the failed attempt: projection unchanged');
      await waitUntil(async () => (await projectionRow(env, '1'))?.amount === 10, 'the redelivery to apply');
      check(checks, calls === 2, 'the redelivery ran the handler again', calls);
      check(
        checks,
        !warnings.some((w) => w.startsWith('could not park delivery for retry')),
        'the retry waited in its retry tier',
        warnings,
      );
      check(checks, (await count(env, `SELECT count(*) AS n FROM $schema.applications`)) === 1, 'applied exactly once');
      check(checks, (await count(env, `SELECT count(*) AS n FROM $schema.inbox`)) === 1, 'one inbox row');
    } finally {
      await relay.stop();
      await consumer.stop();
    }
    return { checks };
  },
};

export const incrementalGap: Scenario = {
  id: 3,
  title: 'incremental gap',
  async run(env) {
    const checks: string[] = [];
    const consumer = startConsumer({
      transport: env.transport,
      queue: env.queue,
      exchange: env.exchange,
      declare: false,
      pool: env.pools.consumer,
      schema: env.schema,
      handlers: env.handlers,
      logger: silentLogger,
      backoff: fastRetry,
    });
    try {
      await consumer.ready();
      const parked = new Promise<void>((resolve) =>
        consumer.on('settled', (s: Settlement) => s.action === 'ack' && s.outcome === 'parked' && resolve()),
      );
      await publishEnvelope(env, envelopeFor('1', 2, 20, 'E2'));
      await parked;
      check(checks, (await projectionRow(env, '1')) === null, 'E2 before E1 is not applied');
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E2'`)) === 0,
        'E2 left no inbox row (the whole transaction rolled back)',
      );
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.parked WHERE event_id = 'E2'`)) === 1,
        'E2 waits in the reorder buffer (committed before its ack)',
      );
      await publishEnvelope(env, envelopeFor('1', 1, 10, 'E1'));
      await waitUntil(async () => (await projectionRow(env, '1'))?.version === 2, 'E1 and the waiting E2 to apply');
      const row = await projectionRow(env, '1');
      check(checks, row?.amount === 30 && row.version === 2, 'after E1 arrives both apply: amount 30, version 2', row);
      const order = await env.pool.query<{ event_id: string }>(
        `SELECT event_id FROM "${env.schema}".applications ORDER BY applied_at, event_id`,
      );
      check(checks, order.rows.map((r) => r.event_id).join(',') === 'E1,E2', 'applied in order E1, E2');
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.parked`)) === 0,
        'E2 left the reorder buffer with its inbox row',
      );
    } finally {
      await consumer.stop();
    }
    return { checks };
  },
};

export const contentConflict: Scenario = {
  id: 4,
  title: 'same eventId, different content',
  async run(env) {
    const checks: string[] = [];
    const processor = new DeliveryProcessor({
      consumer: 'lab-orders',
      pool: env.pools.consumer,
      schema: env.schema,
      handlers: env.handlers,
      logger: silentLogger,
    });
    try {
      await publishEnvelope(env, envelopeFor('1', 1, 10, 'E1'));
      const first = await getOne(env);
      const applied = await processor.process(first);
      first.ack();
      check(checks, applied.action === 'ack' && applied.outcome === 'applied', 'E1 applied');
      await publishEnvelope(env, envelopeFor('1', 1, 99, 'E1'));
      const second = await getOne(env);
      const conflict = await processor.process(second);
      second.ack();
      check(
        checks,
        conflict.action === 'ack' && conflict.outcome === 'quarantined' && conflict.reason === 'content-conflict',
        'E1 with other content is rejected as a conflict',
      );
      check(
        checks,
        conflict.action === 'ack' &&
          conflict.outcome === 'quarantined' &&
          conflict.conflict instanceof ContentConflictError,
        'a ContentConflictError is exposed',
      );
      const row = await projectionRow(env, '1');
      check(checks, row?.amount === 10 && row.version === 1, 'projection untouched: amount 10, version 1', row);
      check(
        checks,
        (await count(
          env,
          `SELECT count(*) AS n FROM $schema.quarantine WHERE event_id = 'E1' AND reason = 'content-conflict'`,
        )) === 1,
        'the conflicting message is kept in quarantine for a person',
      );
    } finally {
      await processor.close();
    }
    return { checks };
  },
};

export const snapshotRepair: Scenario = {
  id: 5,
  title: 'conditional snapshot repair',
  async run(env) {
    const checks: string[] = [];
    const processor = new DeliveryProcessor({
      consumer: 'lab-orders',
      pool: env.pools.consumer,
      schema: env.schema,
      handlers: env.handlers,
      logger: silentLogger,
    });
    const deliver = async (eventId: string, version: number, delta: number) => {
      await publishEnvelope(env, envelopeFor('1', version, delta, eventId));
      const message = await getOne(env);
      const settlement = await processor.process(message);
      message.ack();
      return settlement;
    };
    const repair = (observedVersion: number | null, sourceVersion: number, amount: number) =>
      withTransaction(env.pool, (tx) =>
        repairFromSnapshot(
          tx,
          {
            projection: PROJECTION,
            aggregateType: 'order',
            aggregateId: '1',
            observedVersion,
            sourceVersion,
            schema: env.schema,
          },
          async () => {
            await tx.query(`UPDATE "${env.schema}".order_projection SET amount = $2 WHERE id = $1`, ['1', amount]);
          },
        ),
      );
    try {
      await deliver('E1', 1, 10);
      await deliver('E2', 2, 20);
      check(checks, (await projectionRow(env, '1'))?.version === 2, 'projection at version 2');
      const stale = await repair(1, 3, 35);
      check(
        checks,
        !stale.repaired && stale.reason === 'stale-observation',
        'repair with stale observation 1 is rejected',
      );
      const repaired = await repair(2, 3, 35);
      const atThree = await projectionRow(env, '1');
      check(
        checks,
        repaired.repaired && atThree?.version === 3 && atThree.amount === 35,
        'snapshot 3 with observation 2 applies (amount 35)',
        atThree,
      );
      const e4 = await deliver('E4', 4, 7);
      check(
        checks,
        e4.action === 'ack' && e4.outcome === 'applied' && (await projectionRow(env, '1'))?.version === 4,
        'E4 applies on top of the snapshot: version 4',
      );
      const late = await repair(4, 3, 35);
      check(
        checks,
        !late.repaired && late.reason === 'not-newer' && (await projectionRow(env, '1'))?.amount === 42,
        'snapshot 3 cannot overwrite version 4',
      );
      const e3 = await deliver('E3', 3, 5);
      check(
        checks,
        e3.action === 'ack' && e3.outcome === 'applied' && (await projectionRow(env, '1'))?.amount === 42,
        'late E3 is acked with no effect (covered by baseline 3)',
      );
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E3'`)) === 1,
        'late E3 is recorded in the inbox',
      );
      const e3other = await deliver('E3', 3, 6);
      check(
        checks,
        e3other.action === 'ack' && e3other.outcome === 'quarantined' && e3other.reason === 'content-conflict',
        'E3 with other content is still a conflict',
      );
      const final = await projectionRow(env, '1');
      check(checks, final?.amount === 42 && final.version === 4, 'final state: amount 42, version 4', final);
    } finally {
      await processor.close();
    }
    return { checks };
  },
};

export const brokerDuplicates: Scenario = {
  id: 6,
  title: 'broker duplicate windows',
  async run(env) {
    const checks: string[] = [];
    let published = 0;
    // Relay A crashes between the broker's confirm and the mark; its lease then expires.
    const crashing = new Relay({
      declareExchange: false,
      transport: env.transport,
      pool: env.pools.relay,
      schema: env.schema,
      exchange: env.exchange,
      logger: silentLogger,
      relayId: 'relay-a',
      leaseMs: 300,
      hooks: {
        afterConfirm: (ids) => {
          published += ids.length;
          throw new Error('simulated crash after confirm, before mark');
        },
      },
    });
    const survivor = new Relay({
      declareExchange: false,
      transport: env.transport,
      pool: env.pools.relay,
      schema: env.schema,
      exchange: env.exchange,
      logger: silentLogger,
      relayId: 'relay-b',
    });
    survivor.on('published', (ids) => (published += ids.length));
    const processor = new DeliveryProcessor({
      consumer: 'lab-orders',
      pool: env.pools.consumer,
      schema: env.schema,
      handlers: env.handlers,
      logger: silentLogger,
    });
    try {
      await createOrder(env, '1');
      const { eventId } = await addToOrder(env, { orderId: '1', delta: 10 });
      await crashing.runOnce().catch(() => undefined);
      check(
        checks,
        (await count(
          env,
          `SELECT count(*) AS n FROM $schema.outbox WHERE status = 'pending' AND claimed_by = 'relay-a'`,
        )) === 1,
        'after the crash the event is still unpublished, claimed by relay A',
      );
      await waitUntil(
        async () => (await count(env, `SELECT count(*) AS n FROM $schema.outbox WHERE claim_expires_at < now()`)) === 1,
        "relay A's lease to expire",
      );
      await survivor.runOnce();
      check(
        checks,
        (await count(env, `SELECT count(*) AS n FROM $schema.outbox WHERE status = 'published'`)) === 1,
        'relay B re-published it with the same eventId and marked it',
      );
      const queued = await env.depth();
      check(checks, published === 2 && queued === 2, 'the same event was confirmed twice: two copies in the queue', {
        published,
        queued,
      });

      let deliveries = 0;
      const first = await getOne(env);
      deliveries++;
      const firstResult = await processor.process(first);
      check(
        checks,
        first.properties.messageId === eventId && firstResult.action === 'ack' && firstResult.outcome === 'applied',
        'first delivery committed',
      );
      first.nack({ requeue: true }); // committed, but the ack never happened: the broker requeues
      const redelivered = await getOne(env);
      deliveries++;
      check(checks, redelivered.fields.redelivered, 'the requeued copy comes back flagged redelivered');
      const again = await processor.process(redelivered);
      redelivered.ack();
      const second = await getOne(env);
      deliveries++;
      const secondResult = await processor.process(second);
      second.ack();
      check(
        checks,
        again.action === 'ack' &&
          again.outcome === 'duplicate' &&
          secondResult.action === 'ack' &&
          secondResult.outcome === 'duplicate',
        'both later deliveries are recognised as duplicates and acked',
      );

      const applied = await count(env, `SELECT count(*) AS n FROM $schema.applications`);
      const inbox = await count(env, `SELECT count(*) AS n FROM $schema.inbox`);
      const amount = (await projectionRow(env, '1'))?.amount;
      check(checks, applied === 1 && inbox === 1 && amount === 10, 'applied once, one inbox row, amount 10', {
        applied,
        inbox,
        amount,
      });
      return {
        checks,
        summary: `published=${published} deliveries=${deliveries} applied=${applied} inbox=${inbox} amount=${amount}`,
      };
    } finally {
      await crashing.stop();
      await survivor.stop();
      await processor.close();
    }
  },
};

export const scenarios: readonly Scenario[] = [
  sourceRollback,
  consumerRollback,
  incrementalGap,
  contentConflict,
  snapshotRepair,
  brokerDuplicates,
];

/**
 * On the transport scripts/local-env.ts chose (CONVERGE_TRANSPORT), unless `kind` says which; with
 * the runtime roles LAB_*_URL name (labRolesFromEnv), unless `roles` says which.
 */
export async function runScenario(
  scenario: Scenario,
  kind?: LabTransportKind,
  roles: LabRoles | null = labRolesFromEnv(),
): Promise<ScenarioResult> {
  const env = await createLabEnv(kind, roles);
  try {
    return await scenario.run(env);
  } finally {
    await env.close();
  }
}
