import type amqp from 'amqplib';
import { ConfirmPublisher } from '../transport/publisher.js';
import { CLOSE_GRACE_MS, SocketSwitch, closeWithin, withinDeadline } from '../transport/socket-control.js';
import type { DeadLetterIntake } from './dead-letter.js';

/**
 * The broker side of one consumer session, filled in as the session starts and closed together
 * when it ends: the connection with the kill switch stop() uses on a broker that does not
 * answer, the delivery channel, the confirm channel retry copies go out on, and (quorum) the
 * dead-letter intake.
 */
export class SessionBroker {
  readonly socket = new SocketSwitch();
  connection: amqp.ChannelModel | undefined;
  channel: amqp.Channel | undefined;
  retryPublisher: ConfirmPublisher | undefined;
  deadLetters: DeadLetterIntake | undefined;

  /**
   * The delivery channel, its errors and its close reported to the session (listeners attached
   * before anything else can fail on it), and the confirm channel retry copies go out on.
   */
  async openChannels(
    connection: amqp.ChannelModel,
    events: { error: (err: Error) => void; close: () => void },
  ): Promise<amqp.Channel> {
    const channel = await connection.createChannel();
    channel.on('error', events.error);
    channel.on('close', events.close);
    this.channel = channel;
    this.retryPublisher = new ConfirmPublisher(await connection.createConfirmChannel());
    return channel;
  }

  /** Stops new deliveries; a broker that never sends cancel-ok does not hold up the session's end. */
  async cancel(consumerTag: string): Promise<void> {
    if (!this.channel) return;
    await withinDeadline(this.channel.cancel(consumerTag), CLOSE_GRACE_MS, () => new Error('no cancel-ok')).catch(
      () => undefined,
    );
  }

  /** The dead-letter intake, then the channels and the connection, the socket destroyed after the close grace. */
  async close(): Promise<void> {
    await this.deadLetters?.close();
    const { connection, retryPublisher, socket } = this;
    if (!connection) return socket.kill();
    await closeWithin(connection, retryPublisher, () => socket.kill());
  }
}
