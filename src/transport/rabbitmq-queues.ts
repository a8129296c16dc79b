import type amqp from 'amqplib';
import { BrokerPluginMissingError } from '../runtime/errors.js';
import { probeExchangeType } from './topology.js';
import type { QueueCounts, QueueHeadMessage } from './transport.js';

/**
 * The RabbitMQ side of the transport's look at queues and exchange types (rabbitmq.ts). A passive
 * declare or a get on a missing queue closes its channel (404), so each look gets a throwaway
 * channel and the connection lives on.
 */
export async function inspectQueueOn(connection: amqp.ChannelModel, queue: string): Promise<QueueCounts | null> {
  return onThrowawayChannel(connection, async (channel) => {
    const { messageCount, consumerCount } = await channel.checkQueue(queue);
    return { messages: messageCount, consumers: consumerCount };
  });
}

/**
 * AMQP has no "look at the head": it is fetched with basic.get and returned at once with
 * basic.nack(requeue), back to its place and flagged `redelivered`.
 */
export async function peekHeadOn(connection: amqp.ChannelModel, queue: string): Promise<QueueHeadMessage | null> {
  return onThrowawayChannel(connection, async (channel) => {
    const head = await channel.get(queue, { noAck: false });
    if (!head) return null;
    channel.nack(head, false, true);
    return { properties: head.properties };
  });
}

/**
 * Asks on `probe`, a connection of its own that this call closes: a broker that does not know the
 * type closes the whole connection. A missing type is false; a refusal for permissions is true
 * (RabbitMQ checks the type first, see probeExchangeType).
 */
export async function checkExchangeTypeOn(
  probe: amqp.ChannelModel,
  exchangeType: string,
  probeName: string,
): Promise<boolean> {
  probe.on('error', () => undefined); // the probe's own call reports what matters
  try {
    // The plugin's name only reaches the error, which is turned into `false` here.
    await probeExchangeType(probe, probeName, { exchangeType, plugin: exchangeType });
    return true;
  } catch (err) {
    if (err instanceof BrokerPluginMissingError) return false;
    throw err;
  } finally {
    await probe.close().catch(() => undefined);
  }
}

/** `work` on a channel of its own; a 404 (no such queue) is null, any other refusal rejects. */
async function onThrowawayChannel<T>(
  connection: amqp.ChannelModel,
  work: (channel: amqp.Channel) => Promise<T>,
): Promise<T | null> {
  const channel = await connection.createChannel();
  channel.on('error', () => undefined); // the failed call reports it
  try {
    return await work(channel);
  } catch (err) {
    if ((err as { code?: unknown }).code === 404) return null;
    throw err;
  } finally {
    await channel.close().catch(() => undefined);
  }
}
