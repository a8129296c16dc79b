import amqp from 'amqplib';
import { ConnectionConfigError, ServiceUnavailableError, connectionError } from '../runtime/errors.js';
import { checkBrokerUrl, classifyBrokerError, failureFields, unknownFailure } from '../runtime/connection-failure.js';
import { brokerTarget, type ConnectionTarget } from '../runtime/connection-target.js';
import type { Logger } from '../runtime/logger.js';

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

/** Throws ConnectionConfigError (CONVERGE_BROKER_URL_INVALID) for a URL amqplib cannot use, e.g. an http:// one. */
export function assertBrokerUrl(url: string): void {
  const failure = checkBrokerUrl(url);
  if (failure) throw new ConnectionConfigError(failure);
}

/**
 * The typed error for a failed broker call: ConnectionConfigError when retrying cannot help
 * (login or vhost refused), ServiceUnavailableError otherwise, naming host:port and the reason.
 */
export function brokerFailure(err: unknown, target: ConnectionTarget): ConnectionConfigError | ServiceUnavailableError {
  if (err instanceof ConnectionConfigError || err instanceof ServiceUnavailableError) return err;
  return connectionError(classifyBrokerError(err, target) ?? unknownFailure('RabbitMQ', target, err), err);
}

/**
 * Opens an AMQP connection whose loss is reported through `onClose` instead of an
 * unhandled 'error' event. Reconnection is the caller's loop: relay and consumer each
 * decide what must be re-declared and which work must be re-taken. A failure to connect is
 * thrown as a typed error (see brokerFailure).
 */
export async function openConnection(
  url: string,
  name: string,
  logger: Logger,
  onClose: (err?: Error) => void,
  socketOptions: AmqpSocketOptions = {},
): Promise<amqp.ChannelModel> {
  assertBrokerUrl(url);
  const target = brokerTarget(url);
  let connection: amqp.ChannelModel;
  try {
    connection = await amqp.connect(url, connectOptions(name, socketOptions));
  } catch (err) {
    throw brokerFailure(err, target);
  }
  // The reply text can quote a user name; the classified fields say what matters.
  connection.on('error', (err: Error) =>
    logger.warn(failureFields(brokerFailure(err, target).failure), 'amqp connection error'),
  );
  connection.on('close', (err?: Error) => onClose(err));
  return connection;
}
