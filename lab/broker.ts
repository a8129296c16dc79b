/**
 * The lab's broker, on either transport: RabbitMQ (the default) or the in-process transport
 * (CONVERGE_TRANSPORT=in-process, set by scripts/local-env.ts when no RabbitMQ is reachable).
 * The scenarios only use the Transport seam; the two things it deliberately lacks (it is what
 * converge needs of a broker, not an admin API) live here: counting a queue's ready messages,
 * and removing the lab's queues and exchange afterwards.
 */
import { AMQP_URL, connectRabbit, dropBrokerNames, withChannel } from '../kit/services.js';
import { RabbitMqTransport, createInProcessTransport, type Transport } from '../src/index.js';

export type LabTransportKind = 'rabbitmq' | 'in-process';

/** What scripts/local-env.ts chose; RabbitMQ unless it said otherwise. */
export function labTransportKind(): LabTransportKind {
  return process.env.CONVERGE_TRANSPORT === 'in-process' ? 'in-process' : 'rabbitmq';
}

export interface LabBroker {
  kind: LabTransportKind;
  transport: Transport;
  /** Messages ready in `queue` (not handed to a subscriber), as AMQP's queue.declare-ok counts them. */
  depth(queue: string): Promise<number>;
  /** Removes `names` (queues with their companions, exchanges) and lets go of the broker. */
  close(names: string[]): Promise<void>;
}

export async function openLabBroker(kind: LabTransportKind): Promise<LabBroker> {
  if (kind === 'in-process') {
    // One per environment: its queues and exchange vanish with it.
    const transport = createInProcessTransport();
    return {
      kind,
      transport,
      depth: (queue) => Promise.resolve(transport.depth(queue)),
      close: () => transport.close(),
    };
  }
  // Fails early, with how to start RabbitMQ, when it is not there.
  const admin = await connectRabbit();
  return {
    kind,
    transport: new RabbitMqTransport({ urls: AMQP_URL }),
    depth: async (queue) => (await withChannel(admin, (channel) => channel.checkQueue(queue))).messageCount,
    async close(names) {
      await dropBrokerNames(admin, names);
      await admin.close().catch(() => undefined);
    },
  };
}
