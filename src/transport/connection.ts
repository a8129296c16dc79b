import amqp from 'amqplib';
import type { Logger } from '../runtime/logger.js';
import { redactUrl } from '../runtime/options.js';

/**
 * Passed to amqplib's connect as socket options: with an `amqps://` URL they reach
 * `tls.connect` (ca, cert, key, passphrase, servername, rejectUnauthorized, …), and
 * `credentials` selects e.g. EXTERNAL auth with a client certificate. They are never logged.
 */
export type AmqpSocketOptions = amqp.SocketOptions;

/** The caller's socket options with ours on top; connection_name is ours so a stuck relay stays findable in the management UI. */
export function connectOptions(name: string, socketOptions: AmqpSocketOptions = {}): AmqpSocketOptions {
  return {
    noDelay: true,
    ...socketOptions,
    clientProperties: { ...socketOptions.clientProperties, connection_name: name },
  };
}

/**
 * Opens an AMQP connection whose loss is reported through `onClose` instead of an
 * unhandled 'error' event. Reconnection is the caller's loop: relay and consumer each
 * decide what must be re-declared and which work must be re-taken.
 */
export async function openConnection(
  url: string,
  name: string,
  logger: Logger,
  onClose: (err?: Error) => void,
  socketOptions: AmqpSocketOptions = {},
): Promise<amqp.ChannelModel> {
  const connection = await amqp.connect(url, connectOptions(name, socketOptions));
  connection.on('error', (err: Error) =>
    logger.warn({ err: err.message, broker: redactUrl(url) }, 'amqp connection error'),
  );
  connection.on('close', (err?: Error) => onClose(err));
  return connection;
}
