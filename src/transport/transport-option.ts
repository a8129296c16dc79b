import { z } from 'zod';
import type { AmqpSocketOptions } from './connection.js';
import type { Transport } from './transport.js';
import { DEFAULT_EXCHANGE } from '../runtime/defaults.js';
import { DEFAULT_DELIVERY_LIMIT } from './queue-arguments.js';

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

/** The topic exchange events are published to and queues are bound to. */
export const exchangeOption = z.string().min(1).max(255).default(DEFAULT_EXCHANGE);

/** Topic patterns a queue is bound with. */
export const bindingsOption = z.array(z.string().min(1).max(255)).min(1).default(['#']);

/** A queue converge declares: its retry tiers and dead-letter queue are named after it, hence the bounds. */
export const queueNameOption = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : - only');

/** classic or quorum (replicated, with a delivery limit and a `.dead` queue). */
export const queueTypeOption = z.enum(['classic', 'quorum']);

/** With quorum queues: returns of one message before the broker dead-letters it. */
export const deliveryLimitOption = z.number().int().min(1).default(DEFAULT_DELIVERY_LIMIT);

/** Partition queues of a consistent-hash topology. */
export const partitionsOption = z
  .number()
  .int('must be a positive integer')
  .min(1, 'must be a positive integer')
  .max(1024);
