/**
 * The transport contract, as one suite every Transport must pass (the Watermill pattern):
 * test/unit/transport-in-process.test.ts runs it against the in-process transport,
 * test/integration/transport-rabbitmq.test.ts against RabbitMQ. A behaviour the relay or the
 * consumer relies on belongs here, so neither transport can drift from the other unnoticed.
 */
import assert from 'node:assert/strict';
import type { TestFn } from 'node:test';
import { PublishError } from '../../src/runtime/errors.js';
import { chooseRetryTier, retryTiers } from '../../src/transport/queue-arguments.js';
import type {
  MessageProperties,
  QueueSet,
  Transport,
  TransportConnection,
  TransportDelivery,
} from '../../src/transport/transport.js';

export interface ConformanceRig {
  /** node:test's `describe` or the rig's (which cannot skip). */
  describe: (name: string, fn: () => void) => unknown;
  /** node:test's `test` or the rig's (which has no `.skip`/`.todo`). */
  test: (name: string, fn: TestFn) => unknown;
  /** A name no other test uses; the rig removes broker objects of that name after the test. */
  uniqueName: (prefix: string) => string;
  /** Polls until the condition holds (never a fixed sleep). */
  waitFor: <T>(condition: () => T | undefined | false, description: string, timeoutMs?: number) => Promise<T>;
}

export interface TransportUnderTest {
  transport: Transport;
  /** Called after each test, whatever its outcome. */
  dispose(): Promise<void>;
}

const TIMEOUT_MS = 5_000;

export function transportConformance(label: string, rig: ConformanceRig, open: () => TransportUnderTest): void {
  const { describe, test, uniqueName, waitFor } = rig;

  /** A test body with a transport, its connections closed and the transport disposed afterwards. */
  function withTransport(body: (t: Harness) => Promise<void>): () => Promise<void> {
    return async () => {
      const under = open();
      const harness = new Harness(under.transport, uniqueName);
      try {
        await body(harness);
      } finally {
        await harness.closeAll();
        await under.dispose();
      }
    };
  }

  describe(`transport conformance: ${label}`, () => {
    test(
      'a publish resolves once confirmed and the message reaches every bound queue',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['order.*']);
        const received = await t.collect(set.queue);
        const publisher = await t.publisher();
        await publisher.publish(
          set.exchange,
          'order.Paid',
          Buffer.from('{"n":1}'),
          props('m1', { 'x-tag': 'a' }),
          TIMEOUT_MS,
        );
        const [delivery] = await waitFor(() => received.length === 1 && received, 'the delivery');
        assert.equal(delivery!.content.toString(), '{"n":1}');
        assert.equal(delivery!.properties.messageId, 'm1');
        assert.equal(delivery!.properties.headers?.['x-tag'], 'a');
        assert.equal(delivery!.fields.exchange, set.exchange);
        assert.equal(delivery!.fields.routingKey, 'order.Paid');
        assert.equal(delivery!.fields.redelivered, false);
        delivery!.ack();
      }),
    );

    test(
      'an unroutable publish is returned, not confirmed',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['order.*']);
        const publisher = await t.publisher();
        const failure = await publisher
          .publish(set.exchange, 'invoice.Sent', Buffer.from('{}'), props('m1'), TIMEOUT_MS)
          .then(
            () => undefined,
            (err: unknown) => err,
          );
        assert.ok(failure instanceof PublishError, `expected PublishError, got ${String(failure)}`);
        assert.equal(failure.reason, 'returned');
        // The publisher stays usable after a return.
        await publisher.publish(set.exchange, 'order.Paid', Buffer.from('{}'), props('m2'), TIMEOUT_MS);
      }),
    );

    test(
      'topic bindings: * is one word, # is any number of words',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['order.*.v1', 'audit.#']);
        const received = await t.collect(set.queue);
        const publisher = await t.publisher();
        for (const [key, id] of [
          ['order.Paid.v1', 'a'],
          ['audit', 'b'],
          ['audit.x.y.z', 'c'],
        ] as const)
          await publisher.publish(set.exchange, key, Buffer.from('{}'), props(id), TIMEOUT_MS);
        for (const key of ['order.Paid', 'order.x.y.v1', 'auditing'])
          await assert.rejects(publisher.publish(set.exchange, key, Buffer.from('{}'), props(key), TIMEOUT_MS), {
            reason: 'returned',
          });
        await waitFor(() => received.length === 3, 'three deliveries');
        assert.deepEqual(
          received.map((d) => d.properties.messageId),
          ['a', 'b', 'c'],
        );
      }),
    );

    test(
      'a queue delivers in publish order, within the prefetch window',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const publisher = await t.publisher();
        const ids = Array.from({ length: 40 }, (_, i) => `m${i}`);
        await Promise.all(
          ids.map((id) => publisher.publish(set.exchange, 'k', Buffer.from(id), props(id), TIMEOUT_MS)),
        );
        const held: TransportDelivery[] = [];
        const order: string[] = [];
        let maxHeld = 0;
        const connection = await t.connect();
        await connection.subscribe(
          set.queue,
          (d) => {
            held.push(d);
            order.push(String(d.properties.messageId));
            maxHeld = Math.max(maxHeld, held.length);
          },
          { prefetch: 5 },
        );
        let acked = 0;
        while (acked < ids.length) {
          // A window never grows past the prefetch: the wait would time out on a transport that overfills it.
          await waitFor(() => held.length === Math.min(5, ids.length - acked), 'a full prefetch window');
          const window = held.splice(0);
          acked += window.length;
          for (const d of window) d.ack();
        }
        assert.deepEqual(order, ids);
        assert.ok(maxHeld <= 5, `at most prefetch deliveries unsettled, saw ${maxHeld}`);
      }),
    );

    test(
      'ackAllUpTo settles every earlier delivery: none of them comes back after the connection ends',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const publisher = await t.publisher();
        for (const id of ['a', 'b', 'c'])
          await publisher.publish(set.exchange, 'k', Buffer.from(id), props(id), TIMEOUT_MS);
        const first = await t.connect();
        const held: TransportDelivery[] = [];
        await first.subscribe(set.queue, (d) => held.push(d), { prefetch: 10 });
        await waitFor(() => held.length === 3, 'three deliveries');
        held[1]!.ackAllUpTo(); // a and b
        await first.close(); // c goes back
        await publisher.publish(set.exchange, 'k', Buffer.from('d'), props('d'), TIMEOUT_MS);
        const second = await t.collect(set.queue);
        await waitFor(() => second.length === 2, 'c again, then d');
        assert.deepEqual(
          second.map((d) => d.properties.messageId),
          ['c', 'd'],
        );
        for (const d of second) d.ack();
      }),
    );

    test(
      'a nack with requeue comes back with redelivered set',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const received = await t.collect(set.queue);
        const publisher = await t.publisher();
        await publisher.publish(set.exchange, 'k', Buffer.from('x'), props('m1'), TIMEOUT_MS);
        await waitFor(() => received.length === 1, 'the first delivery');
        assert.equal(received[0]!.fields.redelivered, false);
        received[0]!.nack({ requeue: true });
        await waitFor(() => received.length === 2, 'the redelivery');
        assert.equal(received[1]!.properties.messageId, 'm1');
        assert.equal(received[1]!.fields.redelivered, true);
        received[1]!.ack();
      }),
    );

    test(
      'deliveries left unacked by a crashed consumer come back, redelivered and in order',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const publisher = await t.publisher();
        for (const id of ['a', 'b', 'c'])
          await publisher.publish(set.exchange, 'k', Buffer.from(id), props(id), TIMEOUT_MS);
        const crashing = await t.connect();
        const first: TransportDelivery[] = [];
        await crashing.subscribe(set.queue, (d) => first.push(d), { prefetch: 10 });
        await waitFor(() => first.length === 3, 'three unacked deliveries');
        await crashing.close(); // the consumer's connection ends without an ack
        const second = await t.collect(set.queue);
        await waitFor(() => second.length === 3, 'three redeliveries');
        assert.deepEqual(
          second.map((d) => d.properties.messageId),
          ['a', 'b', 'c'],
        );
        assert.ok(
          second.every((d) => d.fields.redelivered),
          'every redelivery says so',
        );
        // Settling on the dead connection changes nothing and does not throw.
        first[0]!.ack();
        for (const d of second) d.ack();
      }),
    );

    test(
      'a copy in the retry queue comes back to the queue after its delay, not before',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const received = await t.collect(set.queue);
        const publisher = await t.publisher();
        const delayMs = 400;
        const sentAt = performance.now();
        await publisher.publish(
          '',
          set.retryQueue,
          Buffer.from('later'),
          { ...props('r1'), expiration: String(delayMs) },
          TIMEOUT_MS,
        );
        await waitFor(() => received.length === 1, 'the delayed copy');
        const elapsed = receivedAt.get(received[0]!)! - sentAt;
        assert.ok(elapsed >= delayMs, `arrived after ${elapsed.toFixed(0)} ms, before its ${delayMs} ms delay`);
        assert.equal(received[0]!.content.toString(), 'later');
        assert.equal(received[0]!.fields.routingKey, set.queue);
        received[0]!.ack();
      }),
    );

    for (const queueType of ['classic', 'quorum'] as const)
      test(
        `${queueType}: a 1 s retry is not held back behind a 30 s one (one retry tier per delay)`,
        withTransport(async (t) => {
          const set = await t.declare(queueType, ['#'], 20, [1_000, 30_000]);
          const received = await t.collect(set.queue);
          const publisher = await t.publisher();
          // What publishRetryCopy does: the tier of the delay, the delay as the copy's own expiry.
          const park = (id: string, delayMs: number) =>
            publisher.publish(
              '',
              chooseRetryTier(set.retryTiers!, delayMs).queue,
              Buffer.from(id),
              { ...props(id), expiration: String(delayMs) },
              TIMEOUT_MS,
            );
          await park('slow', 30_000);
          const sentAt = performance.now();
          await park('fast', 1_000);
          await waitFor(() => received.length === 1, 'the 1 s copy', 10_000);
          const elapsed = receivedAt.get(received[0]!)! - sentAt;
          assert.equal(received[0]!.properties.messageId, 'fast');
          // The copy waited its delay, by the broker's clock, not ours: RabbitMQ expires by its own
          // millisecond wall-clock timestamps (a quorum copy came back 994.9 ms after our sentAt in CI),
          // and an in-process timer runs from the event loop's cached clock. 50 ms still tells a copy that
          // waited its delay from one that did not wait.
          assert.ok(elapsed >= 1_000 - 50, `back after ${elapsed.toFixed(1)} ms, before its 1 s delay`);
          assert.ok(elapsed < 5_000, `back after ${elapsed.toFixed(0)} ms: held back`);
          assert.equal(received.length, 1, 'the 30 s copy is still waiting in its own tier');
          received[0]!.ack();
        }),
      );

    test(
      'a quorum set dead-letters a rejected message into <queue>.dead',
      withTransport(async (t) => {
        const set = await t.declare('quorum', ['#'], 5);
        const received = await t.collect(set.queue);
        const dead = await t.collect(set.deadQueue!);
        const publisher = await t.publisher();
        await publisher.publish(set.exchange, 'k', Buffer.from('x'), props('d1'), TIMEOUT_MS);
        await waitFor(() => received.length === 1, 'the delivery');
        received[0]!.nack({ requeue: false });
        await waitFor(() => dead.length === 1, 'the dead-lettered message', 15_000);
        assert.equal(dead[0]!.properties.messageId, 'd1');
        assert.equal(lastDeathReason(dead[0]!), 'rejected');
        dead[0]!.ack();
      }),
    );

    test(
      'a quorum set dead-letters a message past its delivery limit',
      withTransport(async (t) => {
        const limit = 2;
        const set = await t.declare('quorum', ['#'], limit);
        const dead = await t.collect(set.deadQueue!);
        const connection = await t.connect();
        let deliveries = 0;
        await connection.subscribe(
          set.queue,
          (d) => {
            deliveries++;
            d.nack({ requeue: true });
          },
          { prefetch: 1 },
        );
        const publisher = await t.publisher();
        await publisher.publish(set.exchange, 'k', Buffer.from('x'), props('d2'), TIMEOUT_MS);
        await waitFor(() => dead.length === 1, 'the message in the dead queue', 15_000);
        assert.equal(deliveries, limit + 1, 'delivered once, then returned `limit` times');
        assert.equal(lastDeathReason(dead[0]!), 'delivery_limit');
        dead[0]!.ack();
      }),
    );

    test(
      'inspectQueue counts ready messages and subscribers; a missing queue is null and the connection lives on',
      withTransport(async (t) => {
        const connection = await t.connect();
        assert.equal(await connection.inspectQueue(uniqueName('cvt.tr.missing')), null);
        const set = await t.declare('classic', ['#']);
        const publisher = await t.publisher();
        await publisher.publish(set.exchange, 'k', Buffer.from('a'), props('i1'), TIMEOUT_MS);
        await publisher.publish(set.exchange, 'k', Buffer.from('b'), props('i2'), TIMEOUT_MS);
        // The same connection after the missing queue: its refusal ended nothing.
        assert.deepEqual(await connection.inspectQueue(set.queue), { messages: 2, consumers: 0 });
        const received = await t.collect(set.queue);
        await waitFor(() => received.length === 2, 'both deliveries');
        // Handed out and unsettled: no longer ready.
        assert.deepEqual(await connection.inspectQueue(set.queue), { messages: 0, consumers: 1 });
        for (const delivery of received) delivery.ack();
      }),
    );

    test(
      'peekHead reads the head message and leaves it first in its queue',
      withTransport(async (t) => {
        const connection = await t.connect();
        assert.equal(await connection.peekHead(uniqueName('cvt.tr.missing')), null, 'a missing queue');
        const set = await t.declare('classic', ['#']);
        assert.equal(await connection.peekHead(set.queue), null, 'an empty queue');
        const publisher = await t.publisher();
        await publisher.publish(
          set.exchange,
          'k',
          Buffer.from('a'),
          { ...props('h1', { 'x-tag': 'a' }), timestamp: 1_700_000_000 },
          TIMEOUT_MS,
        );
        await publisher.publish(set.exchange, 'k', Buffer.from('b'), props('h2'), TIMEOUT_MS);
        for (const look of [1, 2]) {
          const head = await connection.peekHead(set.queue);
          assert.equal(head?.properties.messageId, 'h1', `look ${look}`);
          assert.equal(head?.properties.timestamp, 1_700_000_000);
          assert.equal(head?.properties.headers?.['x-tag'], 'a');
        }
        const received = await t.collect(set.queue);
        await waitFor(() => received.length === 2, 'both deliveries');
        assert.deepEqual(
          received.map((d) => d.properties.messageId),
          ['h1', 'h2'],
        );
        for (const delivery of received) delivery.ack();
      }),
    );

    test(
      'checkExchangeType knows topic exchanges and not a type no plugin provides',
      withTransport(async (t) => {
        const connection = await t.connect();
        assert.equal(await connection.checkExchangeType('topic', uniqueName('cvt.tr.probe')), true);
        assert.equal(await connection.checkExchangeType('x-converge-no-such-type', uniqueName('cvt.tr.probe')), false);
        // A refused type does not end the connection it was asked on.
        const set = await t.declare('classic', ['#']);
        assert.deepEqual(await connection.inspectQueue(set.queue), { messages: 0, consumers: 0 });
      }),
    );

    test(
      'carriedHeaders keeps or names each header, and what it keeps arrives as given',
      withTransport(async (t) => {
        const set = await t.declare('classic', ['#']);
        const received = await t.collect(set.queue);
        const publisher = await t.publisher();
        const given = { 'x-text': 'ü text', 'x-number': 7, 'x-flag': true, 'x-list': ['a', 1] };
        const carried = publisher.carriedHeaders(given);
        for (const name of Object.keys(given))
          assert.ok(name in carried.headers !== carried.omitted.includes(name), `${name} is either carried or omitted`);
        assert.deepEqual(carried.omitted, [], 'plain headers travel on every transport');
        await publisher.publish(set.exchange, 'k', Buffer.from('x'), props('c1', carried.headers), TIMEOUT_MS);
        await waitFor(() => received.length === 1, 'the delivery');
        const arrived = received[0]!.properties.headers ?? {};
        for (const [name, value] of Object.entries(given)) assert.deepEqual(arrived[name], value, name);
        received[0]!.ack();
      }),
    );
  });
}

/** When each delivery reached its subscriber (performance.now()). */
const receivedAt = new WeakMap<TransportDelivery, number>();

function props(messageId: string, headers: Record<string, unknown> = {}): MessageProperties {
  return { messageId, contentType: 'application/octet-stream', persistent: true, headers };
}

function lastDeathReason(delivery: TransportDelivery): unknown {
  const headers = delivery.properties.headers ?? {};
  const deaths = headers['x-death'];
  return (
    headers['x-last-death-reason'] ?? (Array.isArray(deaths) ? (deaths[0] as { reason?: unknown }).reason : undefined)
  );
}

class Harness {
  readonly #transport: Transport;
  readonly #uniqueName: (prefix: string) => string;
  readonly #connections: TransportConnection[] = [];

  constructor(transport: Transport, uniqueName: (prefix: string) => string) {
    this.#transport = transport;
    this.#uniqueName = uniqueName;
  }

  async connect(): Promise<TransportConnection> {
    const connection = await this.#transport.connect({
      name: 'converge transport conformance',
      signal: new AbortController().signal,
      onClose: () => undefined,
    });
    this.#connections.push(connection);
    return connection;
  }

  async publisher() {
    return (await this.connect()).openPublisher();
  }

  async declare(
    queueType: 'classic' | 'quorum',
    bindings: string[],
    deliveryLimit = 20,
    tiersMs: number[] = [],
  ): Promise<QueueSet> {
    const queue = this.#uniqueName('cvt.tr');
    const set: QueueSet = {
      queue,
      retryQueue: `${queue}.retry`,
      // The rig drops the tiers of the default delays; tests use only those.
      retryTiers: retryTiers(queue, tiersMs),
      deadQueue: queueType === 'quorum' ? `${queue}.dead` : null,
      exchange: queue, // the rig drops an exchange named like the test's queue
      bindings,
      queueType,
      deliveryLimit,
    };
    await (await this.connect()).declareQueues(set);
    return set;
  }

  /** Subscribes `queue` on a connection of its own; deliveries pile up unsettled in the array. */
  async collect(queue: string): Promise<TransportDelivery[]> {
    const received: TransportDelivery[] = [];
    await (
      await this.connect()
    ).subscribe(
      queue,
      (d) => {
        receivedAt.set(d, performance.now());
        received.push(d);
      },
      { prefetch: 50 },
    );
    return received;
  }

  async closeAll(): Promise<void> {
    for (const connection of this.#connections.splice(0)) await connection.close();
  }
}
