/**
 * The lab's broker, on either transport: RabbitMQ (the default) or the in-process transport
 * (CONVERGE_TRANSPORT=in-process, set by scripts/local-env.ts when no RabbitMQ is reachable).
 * The scenarios only use the Transport seam; the two things it deliberately lacks (it is what
 * converge needs of a broker, not an admin API) live here: counting a queue's ready messages,
 * removing the lab's queues and exchange afterwards, and declaring the lab's queues so that a
 * killed lab leaves none behind.
 *
 * The article's lab queue is exclusive and auto-deleted: its one connection reads it with
 * basic.get. Here the relays and consumers of a scenario each open their own connection, which an
 * exclusive queue refuses (405 RESOURCE_LOCKED), and auto-delete would drop the queue whenever
 * a scenario stops its consumer between steps. So on RabbitMQ the lab's queue and its retry
 * queue get a queue expiry (`x-expires`): the broker deletes each once it has had no consumer,
 * no basic.get and no redeclare for that long, which is what happens when the lab process is
 * killed. The scenarios' consumers run with `declare: false`, since their plain declaration
 * would disagree with these arguments (406). The in-process transport's queues live in the
 * lab process's memory and end with it.
 */
import type { ChannelModel } from 'amqplib';
import { AMQP_URL, connectRabbit, dropBrokerNames, withChannel } from '../kit/services.js';
import {
  RabbitMqTransport,
  createInProcessTransport,
  type QueueSet,
  type Transport,
  type TransportConnection,
} from '../src/index.js';

export type LabTransportKind = 'rabbitmq' | 'in-process';

/** What scripts/local-env.ts chose; RabbitMQ unless it said otherwise. */
export function labTransportKind(): LabTransportKind {
  return process.env.CONVERGE_TRANSPORT === 'in-process' ? 'in-process' : 'rabbitmq';
}

export interface LabBroker {
  kind: LabTransportKind;
  transport: Transport;
  /** Declares the lab's exchange, queue (bound as `set` says) and retry queue; on RabbitMQ with the queue expiry. */
  declare(connection: TransportConnection, set: QueueSet): Promise<void>;
  /** Messages ready in `queue` (not handed to a subscriber), as AMQP's queue.declare-ok counts them. */
  depth(queue: string): Promise<number>;
  /** Removes `names` (queues with their companions, exchanges) and lets go of the broker. */
  close(names: string[]): Promise<void>;
}

/**
 * How long an unused lab queue outlives its lab on RabbitMQ, in ms: LAB_QUEUE_EXPIRES_MS, by
 * default 30 s, far above any pause inside a scenario (each runs in about a second).
 */
export function labQueueExpiresMs(): number {
  const configured = Number(process.env.LAB_QUEUE_EXPIRES_MS);
  return Number.isInteger(configured) && configured > 0 ? configured : 30_000;
}

export async function openLabBroker(kind: LabTransportKind): Promise<LabBroker> {
  if (kind === 'in-process') {
    // One per environment: its queues and exchange vanish with it.
    const transport = createInProcessTransport();
    return {
      kind,
      transport,
      declare: (connection, set) => connection.declareQueues(set),
      depth: (queue) => Promise.resolve(transport.depth(queue)),
      close: () => transport.close(),
    };
  }
  // Fails early, with how to start RabbitMQ, when it is not there.
  const admin = await connectRabbit();
  return {
    kind,
    transport: new RabbitMqTransport({ urls: AMQP_URL }),
    declare: (_connection, set) => declareExpiring(admin, set, labQueueExpiresMs()),
    depth: async (queue) => (await withChannel(admin, (channel) => channel.checkQueue(queue))).messageCount,
    async close(names) {
      await dropBrokerNames(admin, names);
      await admin.close().catch(() => undefined);
    },
  };
}

/** The classic queue set RabbitMqTransport declares (same exchange, bindings, retry tiers and dead-lettering), each queue with `x-expires`. */
async function declareExpiring(admin: ChannelModel, set: QueueSet, expiresMs: number): Promise<void> {
  await withChannel(admin, async (channel) => {
    // Auto-deleted once its last binding goes, i.e. when the expiring queue does: a killed lab leaves no exchange.
    await channel.assertExchange(set.exchange, 'topic', { durable: true, autoDelete: true });
    await channel.assertQueue(set.queue, { durable: true, arguments: { 'x-expires': expiresMs } });
    for (const pattern of set.bindings) await channel.bindQueue(set.queue, set.exchange, pattern);
    const retry = { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': set.queue, 'x-expires': expiresMs };
    await channel.assertQueue(set.retryQueue, { durable: true, arguments: retry });
    for (const tier of set.retryTiers ?? [])
      await channel.assertQueue(tier.queue, { durable: true, arguments: { ...retry, 'x-message-ttl': tier.delayMs } });
  });
}
