import type amqp from 'amqplib';
import type { AmqpSocketOptions } from './connection.js';

/** How long a graceful close waits for the broker's close-ok before the socket is destroyed. */
export const CLOSE_GRACE_MS = 2_000;

/**
 * The kill switch of one AMQP connection's socket, handed to amqplib through its socket options
 * (Node sockets take an AbortSignal). A stop() must not wait on a broker that does not answer:
 * `kill()` fails a connect in progress at once and ends an open connection (amqplib then emits
 * 'close' and fails whatever waited on it).
 */
export class SocketSwitch {
  readonly #controller = new AbortController();

  /** The caller's options with this switch (connectOptions adds the connect timeout). */
  socketOptions(base: AmqpSocketOptions = {}): AmqpSocketOptions {
    // amqplib passes unknown socket options on to net.connect/tls.connect; its types do not list `signal`.
    const options: AmqpSocketOptions & { signal: AbortSignal } = { ...base, signal: this.#controller.signal };
    return options;
  }

  kill(): void {
    this.#controller.abort();
  }
}

/**
 * Closes `channel` (if any) and then `connection` the polite way, but destroys the socket (`kill`)
 * if the broker has not answered after `graceMs`: a close-ok that never comes (a stalled
 * connection, a broker that stopped reading) must not hold up a reconnect or a stop().
 */
export async function closeWithin(
  connection: amqp.ChannelModel,
  channel: { close(): Promise<void> } | undefined,
  kill: () => void,
  graceMs = CLOSE_GRACE_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = new Promise<void>((resolve) => connection.once('close', () => resolve()));
  const polite = (async () => {
    await channel?.close().catch(() => undefined);
    await connection.close().catch(() => undefined);
  })();
  const impatient = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      kill();
      resolve();
    }, graceMs);
  });
  try {
    await Promise.race([polite, ended, impatient]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `work`, or `onTimeout()`'s error after `ms`: for the broker calls made while opening a channel,
 * which amqplib would otherwise wait on for as long as the connection stays up.
 */
export async function withinDeadline<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
