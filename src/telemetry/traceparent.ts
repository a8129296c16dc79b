import { ROOT_CONTEXT, isSpanContextValid, trace, type Context, type SpanContext } from '@opentelemetry/api';

/**
 * W3C traceparent <-> OpenTelemetry span context, by hand: the api package has no propagator
 * of its own (that comes with an SDK), and converge must continue a trace even when the
 * service registered none. Pure functions; the wire format stays `00-<trace id>-<span id>-<flags>`.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The remote span context a traceparent names, or undefined for anything malformed or all-zero. */
export function parseTraceparent(value: unknown): SpanContext | undefined {
  if (typeof value !== 'string') return undefined;
  const match = TRACEPARENT.exec(value);
  // Version ff is forbidden by the W3C spec; later versions keep this prefix, so they parse.
  if (!match || match[1] === 'ff') return undefined;
  const context: SpanContext = {
    traceId: match[2]!,
    spanId: match[3]!,
    traceFlags: Number.parseInt(match[4]!, 16),
    isRemote: true,
  };
  return isSpanContextValid(context) ? context : undefined;
}

/** The traceparent of a span context, or undefined when it is invalid (no SDK: the no-op span's context). */
export function formatTraceparent(context: SpanContext): string | undefined {
  if (!isSpanContextValid(context)) return undefined;
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** A context whose parent is the remote span a traceparent names; the root context when there is none. */
export function remoteContext(traceparent: unknown): Context {
  const parent = parseTraceparent(traceparent);
  return parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
}
