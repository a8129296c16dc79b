import amqp from 'amqplib';
import type { Logger } from '../ops/logger.js';
import { redactUrl } from '../ops/config.js';

/**
 * Opens an AMQP connection whose loss is reported through `onClose` instead of an
 * unhandled 'error' event. Reconnection is the caller's loop: relay and consumer each
 * decide what must be re-declared and which work must be re-taken.
 */
export async function openConnection(url: string, name: string, logger: Logger, onClose: (err?: Error) => void): Promise<amqp.ChannelModel> {
  // connection_name shows up in the management UI and rabbitmqctl, which makes a stuck relay findable.
  const connection = await amqp.connect(url, { noDelay: true, clientProperties: { connection_name: name } });
  connection.on('error', (err: Error) => logger.warn({ err: err.message, broker: redactUrl(url) }, 'amqp connection error'));
  connection.on('close', (err?: Error) => onClose(err));
  return connection;
}
