import { createHash } from 'node:crypto';
import { ConfigError } from '../runtime/errors.js';

/**
 * Effect names are stored and shown next to their keys, so they stay short, printable and
 * free of separators a person would misread (`send-sms`, `payment.capture`, `email:welcome`).
 */
const EFFECT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;

/** Versions the derivation: a change of recipe must never produce the old keys for other calls. */
const DOMAIN = 'converge-effect-key/v1';

export function validEffectName(effect: string): string {
  if (!EFFECT_NAME.test(effect)) {
    throw new ConfigError([
      {
        path: 'effect',
        message: 'must be 1-100 characters of letters, digits and _ . : - starting with a letter or digit',
      },
    ]);
  }
  return effect;
}

/**
 * The idempotency key of one remote effect of one event: the same eventId and effect name give
 * the same key in every process, run and release, and any other pair gives another. It is a
 * lower-case RFC 9562 UUID (version 8, the custom kind): 36 characters of hex and dashes, which
 * every remote's key field, URL and header accepts. The bits are the first 122 of
 * SHA-256("converge-effect-key/v1", effect, eventId), each part length-prefixed so no two pairs
 * can spell the same input. Nothing of the event's payload goes into it.
 */
export function idempotencyKey(event: { readonly eventId: string }, effect: string): string {
  validEffectName(effect);
  if (typeof event.eventId !== 'string' || event.eventId.length === 0) {
    throw new ConfigError([{ path: 'event.eventId', message: 'must be a non-empty string' }]);
  }
  const hash = createHash('sha256');
  for (const part of [DOMAIN, effect, event.eventId]) hash.update(`${Buffer.byteLength(part)}:${part}`);
  const bytes = hash.digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80; // version 8
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
