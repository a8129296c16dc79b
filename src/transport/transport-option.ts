import { z } from 'zod';
import type { AmqpSocketOptions } from './connection.js';
import type { Transport } from './transport.js';

/** The `transport` option of the relay and the consumer: another broker than RabbitMQ at amqpUrl. */
export const transportOption = z
  .custom<Transport>(
    (v) => typeof v === 'object' && v !== null && typeof (v as Transport).connect === 'function',
    'must be a Transport',
  )
  .meta({ typeName: 'Transport' })
  .optional();

/**
 * The `amqpSocketOptions` option of the relay, the CDC relay and the consumer: passed to amqplib
 * as they are (see AmqpSocketOptions), so only their being an object is checked here.
 */
export const amqpSocketOptionsOption = z
  .custom<AmqpSocketOptions>((v) => typeof v === 'object' && v !== null, 'must be an object')
  .meta({ typeName: 'AmqpSocketOptions' })
  .default({})
  .describe(
    'Socket options for amqplib: with amqps:// they go to tls.connect (ca, cert, key, passphrase, servername, rejectUnauthorized); credentials can select EXTERNAL auth. Never logged.',
  );
