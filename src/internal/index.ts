/**
 * `converge-events/internal`: UNSTABLE. Pieces of the pipeline without its I/O, for tools that speak
 * converge's wire format (another producer, a custom relay or transport) and for converge's own
 * tests. Any release may change or remove them; services need none of it (docs/architecture.md).
 */
export { DeliveryProcessor, decideFailure, upcast, REPLAY_OF_HEADER } from '../inbox/index.js';
export type { ProcessorOptions, RawDelivery, DrainSink, FailureDecision, FailureContext } from '../inbox/index.js';
export { outboxRowToEnvelope } from '../relay/index.js';
export type { OutboxEnvelopeRow } from '../relay/index.js';
export { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY, HEADER } from '../transport/wire.js';
export type { EncodedMessage, RoutingKeyFn } from '../transport/wire.js';
export { fingerprint, canonicalJson } from '../envelope/fingerprint.js';
export { parseEnvelope, MAX_JSON_DEPTH } from '../envelope/validate.js';
