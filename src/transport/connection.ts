import amqp from 'amqplib';
import { ConnectionConfigError, ServiceUnavailableError, connectionError } from '../runtime/errors.js';
import { classifyBrokerError, failureFields, unknownFailure } from '../runtime/connection-failure.js';
import { brokerTarget, type ConnectionTarget } from '../runtime/connection-target.js';
import type { Logger } from '../runtime/logger.js';
import { BrokerAddresses } from './broker-addresses.js';
import { guardConnection } from './header-guard.js';

/**
 * Passed to amqplib's connect as socket options: with an `amqps://` URL they reach
 * `tls.connect` (ca, cert, key, passphrase, servername, rejectUnauthorized, …), and
 * `credentials` selects e.g. EXTERNAL auth with a client certificate. They are never logged.
 */
export type AmqpSocketOptions = amqp.SocketOptions;

/**
 * How long a TCP connect plus AMQP handshake may take before the next node is tried. Without it a
 * node that black-holes packets holds a reconnect for the OS's TCP timeout (minutes).
 * `amqpSocketOptions.timeout` overrides it; amqplib clears it once the connection is open.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** The caller's socket options with ours on top; connection_name is ours so a stuck relay stays findable in the management UI. */
export function connectOptions(name: string, socketOptions: AmqpSocketOptions = {}): AmqpSocketOptions {
  return {
    noDelay: true,
    timeout: DEFAULT_CONNECT_TIMEOUT_MS,
    ...socketOptions,
    clientProperties: { ...socketOptions.clientProperties, connection_name: name },
  };
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
 * decide what must be re-declared and which work must be re-taken. With several broker
 * addresses (the nodes of a cluster) each is tried once, in the order BrokerAddresses keeps;
 * when none accepts, the failure is thrown typed (see brokerFailure): a refusal that retrying
 * cannot cure (login, vhost) before any other, else the last node's.
 */
export async function openConnection(
  addresses: string | readonly string[] | BrokerAddresses,
  name: string,
  logger: Logger,
  onClose: (err?: Error) => void,
  socketOptions: AmqpSocketOptions = {},
): Promise<amqp.ChannelModel> {
  const brokers = addresses instanceof BrokerAddresses ? addresses : new BrokerAddresses(addresses);
  const failures: (ConnectionConfigError | ServiceUnavailableError)[] = [];
  for (const url of brokers.order()) {
    try {
      const connection = await connectTo(url, name, logger, socketOptions);
      brokers.connected(url);
      if (brokers.urls.length > 1) logger.info({ broker: brokerTarget(url).endpoint }, 'connected to RabbitMQ');
      connection.on('close', (err?: Error) => {
        brokers.lost(url);
        onClose(err);
      });
      return connection;
    } catch (err) {
      const failure = brokerFailure(err, brokerTarget(url));
      if (brokers.urls.length > 1)
        logger.debug(failureFields(failure.failure), 'RabbitMQ node refused; trying the next');
      failures.push(failure);
      // Stopping killed the attempt: the other nodes are not wanted either.
      if ((socketOptions as { signal?: AbortSignal }).signal?.aborted) break;
    }
  }
  throw failures.find((f) => f instanceof ConnectionConfigError) ?? failures[failures.length - 1]!;
}

async function connectTo(
  url: string,
  name: string,
  logger: Logger,
  socketOptions: AmqpSocketOptions,
): Promise<amqp.ChannelModel> {
  const target = brokerTarget(url);
  const connection = await amqp.connect(url, connectOptions(name, socketOptions));
  if (!guardConnection(connection))
    logger.warn({}, 'amqplib internals not as expected: AMQP header tables are decoded without bounds');
  // The reply text can quote a user name; the classified fields say what matters.
  connection.on('error', (err: Error) => {
    // Our own stop() killed a stalled socket: not a broker failure worth a warning.
    if ((err as { code?: unknown }).code === 'ABORT_ERR') return;
    logger.warn(failureFields(brokerFailure(err, target).failure), 'amqp connection error');
  });
  return connection;
}
