import { z } from 'zod';
import type { Transport } from './transport.js';

/** The `transport` option of the relay and the consumer: another broker than RabbitMQ at amqpUrl. */
export const transportOption = z
  .custom<Transport>(
    (v) => typeof v === 'object' && v !== null && typeof (v as Transport).connect === 'function',
    'must be a Transport',
  )
  .meta({ typeName: 'Transport' })
  .optional();
