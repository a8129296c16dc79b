/**
 * Opens one lab environment on RabbitMQ, prints its names as one JSON line and waits to be
 * killed: lab.test.ts kills it with SIGKILL (nothing of close() runs) to check that the lab's
 * queues do not outlive it.
 */
import { createLabEnv } from './harness.js';

const env = await createLabEnv('rabbitmq');
console.log(JSON.stringify({ schema: env.schema, exchange: env.exchange, queue: env.queue }));
setInterval(() => undefined, 60_000);
