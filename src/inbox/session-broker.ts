import type { Subscription, TransportConnection, TransportPublisher } from '../transport/transport.js';
import type { DeadLetterIntake } from './dead-letter.js';

/**
 * The broker side of one consumer session, filled in as the session starts and closed together
 * when it ends: the connection with the kill switch stop() uses on a broker that does not answer
 * (aborting it fails a connect in progress and destroys an open connection), the subscription,
 * the confirm channel retry copies go out on, and (quorum) the dead-letter intake.
 */
export class SessionBroker {
  readonly kill = new AbortController();
  connection: TransportConnection | undefined;
  subscription: Subscription | undefined;
  retryPublisher: TransportPublisher | undefined;
  deadLetters: DeadLetterIntake | undefined;
  #reopening: Promise<TransportPublisher | undefined> | undefined;

  /**
   * The retry channel, opened again on this connection when the broker closed it (it refused one
   * copy): one refused copy must not fail every later one until the session ends. Undefined while
   * none can be opened (the connection is going too); the copy then goes back after its backoff.
   */
  async retryChannel(): Promise<TransportPublisher | undefined> {
    const { connection, retryPublisher } = this;
    if (!retryPublisher?.closed || !connection) return retryPublisher;
    this.#reopening ??= connection
      .openPublisher()
      .then(
        (publisher) => (this.retryPublisher = publisher),
        () => undefined,
      )
      .finally(() => (this.#reopening = undefined));
    return this.#reopening;
  }

  /** Stops new deliveries; a broker that never sends cancel-ok does not hold up the session's end. */
  async cancel(): Promise<void> {
    await this.subscription?.cancel();
  }

  /** The dead-letter intake, then the connection (its channels with it), the socket destroyed after the close grace. */
  async close(): Promise<void> {
    await this.deadLetters?.close();
    const { connection } = this;
    if (!connection) return this.kill.abort();
    await connection.close();
  }
}
