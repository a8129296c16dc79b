import type { Message, Queue } from './in-process-queue.js';

export type DeathReason = 'expired' | 'rejected' | 'delivery_limit';

/**
 * Starts the expiry timer of a message that has an `expiration` or sits in a queue with a TTL, the
 * lower of the two winning as on RabbitMQ (the delayed retry: it waits in a retry tier, then is
 * dead-lettered back). Each message expires on its own time, never held back by the one ahead: what
 * RabbitMQ would do with one tier per delay. Unref'd, so a waiting retry keeps no process alive.
 */
export function armExpiry(message: Message, queueTtlMs: number | null, onExpired: () => void): void {
  const own = message.properties.expiration === undefined ? NaN : Number(message.properties.expiration);
  const delay = Math.min(Number.isFinite(own) ? own : Infinity, queueTtlMs ?? Infinity);
  if (!Number.isFinite(delay)) return;
  armUntil(message, performance.now() + Math.max(0, delay), onExpired);
}

// A timer may fire up to a millisecond early: libuv starts it from the loop's cached clock, which
// lags the real one. RabbitMQ never hands a message back before its TTL, so neither do we.
function armUntil(message: Message, due: number, onExpired: () => void): void {
  message.expiry = setTimeout(
    () => {
      const left = due - performance.now();
      if (left > 0) armUntil(message, due, onExpired);
      else onExpired();
    },
    Math.max(0, Math.ceil(due - performance.now())),
  );
  message.expiry.unref();
}

/**
 * The message as it arrives in `target`, dead-lettered from `from`: without its expiration and
 * with the x-death headers RabbitMQ adds (the newest death first).
 */
export function deadLettered(from: Queue, message: Message, target: Queue, reason: DeathReason): Omit<Message, 'seq'> {
  const { expiration: _expired, ...properties } = message.properties;
  const death = {
    queue: from.name,
    reason,
    count: 1,
    exchange: message.exchange,
    'routing-keys': [message.routingKey],
  };
  const previous = properties.headers?.['x-death'];
  return {
    body: message.body,
    exchange: '',
    routingKey: target.name,
    redelivered: false,
    returns: 0,
    properties: {
      ...properties,
      headers: {
        ...properties.headers,
        'x-death': [death, ...(Array.isArray(previous) ? (previous as unknown[]) : [])],
        'x-first-death-reason': properties.headers?.['x-first-death-reason'] ?? reason,
        'x-first-death-queue': properties.headers?.['x-first-death-queue'] ?? from.name,
        'x-last-death-reason': reason,
        'x-last-death-queue': from.name,
      },
    },
  };
}
