import { ServiceUnavailableError } from '../runtime/errors.js';
import { brokerFailure } from './connection.js';
import { InProcessBroker } from './in-process-broker.js';
import { InProcessConnection } from './in-process-connection.js';
import type { ConnectRequest, Transport, TransportConnection } from './transport.js';

export { topicMatches } from './in-process-topic.js';

/**
 * A broker in memory, for one Node process: for development, demos and tests, NOT a broker.
 * Nothing is durable (a restart loses every message), nothing crosses the process, and there is
 * no flow control. What it does keep is the contract converge relies on (see transport.ts and
 * test/conformance/transport.ts): confirms only for routed messages, returns for unroutable
 * ones, FIFO per queue, prefetch, redelivery with `redelivered` after a nack or a closed
 * connection, per-message expiry dead-lettered into another queue (delayed retry), and a
 * delivery limit that dead-letters into `<queue>.dead` for quorum queue sets.
 *
 * Differences from RabbitMQ worth knowing: an expiry is honoured per message (RabbitMQ only at
 * the head of a queue), and a requeued message goes back to its original place in the queue.
 *
 * The parts, each in its own file: the queues and their messages (in-process-queue.ts), the
 * store that routes, requeues, dead-letters and dispatches (in-process-broker.ts, with the
 * expiry timers and x-death headers in in-process-dead-letter.ts), connections
 * (in-process-connection.ts), the publish side (in-process-publisher.ts) and the consume/ack
 * side (in-process-subscription.ts).
 */
export function createInProcessTransport(): InProcessTransport {
  return new InProcessTransport();
}

export class InProcessTransport implements Transport {
  readonly kind = 'in-process';
  readonly #broker = new InProcessBroker();
  readonly #connections = new Set<InProcessConnection>();
  #closed = false;

  failure(err: unknown): Error {
    return err instanceof ServiceUnavailableError ? err : brokerFailure(err, { endpoint: 'in-process' });
  }

  connect(request: ConnectRequest): Promise<TransportConnection> {
    if (this.#closed || request.signal.aborted) return Promise.reject(new Error('in-process transport closed'));
    const connection = new InProcessConnection(this.#broker, request, (closed) => this.#connections.delete(closed));
    this.#connections.add(connection);
    return Promise.resolve(connection);
  }

  /** Ends every connection (their unacked deliveries go back) and clears every expiry timer. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const connection of [...this.#connections]) await connection.close();
    this.#broker.clear();
  }

  /** Messages waiting in `queue` (not handed out), for tests and tools. */
  depth(queue: string): number {
    return this.#broker.depth(queue);
  }
}
