/**
 * Remote side effects of next-hop events (docs/remote-effects.md): a stable idempotency key per
 * event and effect, and an executor that calls the remote with it and records the outcome.
 */
export { idempotencyKey } from './key.js';
export { performEffect, readEffect, retryFailedEffect, effectOptions, effectRefOptions } from './perform.js';
export type { EffectOptions, EffectRef, EffectOutcome, EffectRecord, EffectStatus } from './perform.js';
