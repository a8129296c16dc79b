/**
 * The relay as a process of its own: publishes committed outbox events to RabbitMQ with publisher
 * confirms until SIGTERM or SIGINT, then finishes the batch in flight and exits. `converge relay`
 * does the same from the command line.
 *
 * Environment: DATABASE_URL, AMQP_URL, EXAMPLE_SCHEMA (default `shop`), EXAMPLE_EXCHANGE (default `converge.events`).
 */
import { createConverge } from 'converge-events';

const converge = createConverge({
  connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  schema: process.env.EXAMPLE_SCHEMA ?? 'shop',
  exchange: process.env.EXAMPLE_EXCHANGE ?? 'converge.events',
});
// On the signal the relay finishes its batch and closes its own connections, and the process exits.
const relay = converge.startRelay({ handleSignals: true });

relay.on('published', (eventIds) => console.log(`published ${eventIds.length} event(s)`));
relay.on('error', (err) => console.error(`relay: ${err.name}; retrying`));
