/**
 * OpenTelemetry spans through `@opentelemetry/api` alone: no-ops until the service registers
 * an SDK. Imports only runtime/ and envelope/, so every layer above may trace.
 */
export { traceAppend, tracePublish, traceDeliveries, type TracedSettlement } from './spans.js';
export { formatTraceparent, parseTraceparent, remoteContext } from './traceparent.js';
export { convergeTracer, TRACER_NAME } from './tracer.js';
export { ATTR, type PublishedRow, type TracedDelivery } from './attributes.js';
