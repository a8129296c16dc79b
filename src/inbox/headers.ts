/** Header carrying how many times a delivery has been tried (set on the copies sent to the retry queue). */
export const ATTEMPT_HEADER = 'x-converge-attempt';
/** Headers that keep the first exchange and routing key of a delivery across trips through the retry queue. */
export const ORIGIN_EXCHANGE_HEADER = 'x-converge-original-exchange';
export const ORIGIN_ROUTING_KEY_HEADER = 'x-converge-original-routing-key';

/** This delivery's attempt number: 1 when it comes for the first time. */
export function readAttempt(delivery: { properties: { headers?: Record<string, unknown> | undefined } }): number {
  const previous = Number(delivery.properties.headers?.[ATTEMPT_HEADER] ?? 0);
  return Number.isInteger(previous) && previous >= 0 ? previous + 1 : 1;
}
