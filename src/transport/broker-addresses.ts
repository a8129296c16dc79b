import { checkBrokerUrl } from '../runtime/connection-failure.js';
import { brokerTarget, type ConnectionTarget } from '../runtime/connection-target.js';
import { ConnectionConfigError } from '../runtime/errors.js';

/**
 * The RabbitMQ nodes a relay or consumer may connect to, in the order to try them. One URL is a
 * list of one. After a node drops the connection it moves to the back of the order, so a
 * reconnect goes to a surviving node first instead of waiting on the one that just failed; a node
 * that accepted the last connection stays first, so clients do not wander without need.
 */
export class BrokerAddresses {
  readonly urls: readonly string[];
  #first = 0;

  /** Throws ConnectionConfigError (CONVERGE_BROKER_URL_INVALID) for a URL amqplib cannot use, e.g. an http:// one. */
  constructor(urls: string | readonly string[]) {
    this.urls = typeof urls === 'string' ? [urls] : [...urls];
    if (this.urls.length === 0) throw new RangeError('at least one broker URL is required');
    for (const url of this.urls) {
      const failure = checkBrokerUrl(url);
      if (failure) throw new ConnectionConfigError(failure);
    }
  }

  /** Every URL once, starting with the preferred one. */
  order(): string[] {
    return this.urls.map((_, i) => this.urls[(this.#first + i) % this.urls.length]!);
  }

  /** The URL tried first next time: the one connected now, or the next after one that was lost. */
  get preferred(): string {
    return this.urls[this.#first]!;
  }

  /** Where errors point: the preferred node's host and port (never its credentials). */
  get target(): ConnectionTarget {
    return brokerTarget(this.preferred);
  }

  connected(url: string): void {
    const index = this.urls.indexOf(url);
    if (index >= 0) this.#first = index;
  }

  lost(url: string): void {
    const index = this.urls.indexOf(url);
    if (index >= 0 && index === this.#first) this.#first = (index + 1) % this.urls.length;
  }
}
