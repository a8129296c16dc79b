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
