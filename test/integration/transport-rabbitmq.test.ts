/** The RabbitMQ transport against the transport contract (test/conformance/transport.ts). */
import { RabbitMqTransport } from '../../src/transport/rabbitmq.js';
import { transportConformance } from '../conformance/transport.js';
import { AMQP_URL, describe, test, uniqueName, waitFor } from '../support/rig.js';

transportConformance('RabbitMQ', { describe, test, uniqueName, waitFor }, () => ({
  transport: new RabbitMqTransport({ urls: AMQP_URL }),
  dispose: async () => undefined,
}));
