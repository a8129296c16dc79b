import { trace, type Tracer } from '@opentelemetry/api';
import { packageVersion } from '../runtime/package-version.js';

export const TRACER_NAME = 'converge-events';

let version: string | undefined;

/**
 * converge's tracer. Asked of the global provider on every call rather than kept: a provider
 * registered (or replaced) after converge was loaded is used from its next span on. Without an
 * SDK the api hands out a no-op tracer, and every span below costs next to nothing.
 */
export function convergeTracer(): Tracer {
  version ??= packageVersion(import.meta.url);
  return trace.getTracer(TRACER_NAME, version);
}
