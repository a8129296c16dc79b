export { Consumer, startConsumer } from './consumer.js';
export type { ConsumerEvents, ConsumerStats } from './consumer.js';
export { DeliveryProcessor, createDeliveryProcessor } from './processor.js';
export { ATTEMPT_HEADER } from './headers.js';
export type { Settlement } from './processor.js';
export { classifyFailure } from './classify.js';
export type { FailureAction } from './classify.js';
export type { ConsumerOptions, ProcessorOptions, EventHandler, BatchHandler, HandlerContext } from './options.js';
export type { QuarantineReason, RawDelivery } from './quarantine.js';
