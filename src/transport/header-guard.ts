import type amqp from 'amqplib';
import {
  DEFAULT_HEADER_BOUNDS,
  inspectBasicProperties,
  type HeaderBounds,
  type HeaderRejection,
} from './header-bounds.js';

/**
 * Puts header-bounds.ts in front of amqplib's decoding of content headers, on one connection.
 *
 * amqplib reads frames through `connection.recvFrame()` (called as a method, from its accept
 * loop and from itself while it waits for more bytes), which parses the next frame off
 * `connection.rest` and decodes it with module-level bindings (frame.js and defs.js capture
 * their decoders at load, so patching their exports would change nothing, and they are not
 * importable under the package's `exports` anyway). So the guard is an own property on this one
 * connection object, wrapping the prototype's method: before amqplib sees a complete content
 * header frame, the guard checks its properties; one over the bounds or malformed is taken off
 * `rest` here and answered with the frame amqplib would have produced, its headers empty and
 * the rejection recorded against the properties object (which amqplib hands on unchanged as
 * `message.properties`). Every other frame, and every other amqplib connection in the process,
 * is untouched.
 */

/** The fields of amqplib's Connection the guard relies on (amqplib 2.x lib/connection.js). */
interface FrameSource {
  rest: Buffer;
  maxFrameSize?: number;
  recvFrame(): unknown;
}

const FRAME_HEADER = 2;
const FRAME_END = 0xce;
const BASIC_CLASS = 60;

const rejections = new WeakMap<object, HeaderRejection>();

/** The rejection of a delivery's properties, if the guard set its headers aside. */
export function headerRejectionOf(properties: object): HeaderRejection | undefined {
  return rejections.get(properties);
}

/** A content header frame as amqplib's decodeFrame returns it, and the bytes after it. */
export interface GuardedFrame {
  frame: { id: number; channel: number; size: number; fields: object };
  rest: Buffer;
}

/**
 * What to do with the frame at the start of `rest` (`maxFrameSize` as amqplib holds it, 0: no
 * limit). null: not a complete content header (another frame type, an incomplete frame, one
 * amqplib refuses on its own terms): amqplib decodes it. `decode`: properties within the bounds,
 * amqplib decodes them; should it throw all the same, `setAside()` is the frame to use instead
 * (every property set aside). `set-aside`: properties over the bounds or malformed, answered here.
 */
export function guardContentHeader(
  rest: Buffer,
  maxFrameSize: number,
  bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS,
): null | { action: 'decode'; setAside: () => GuardedFrame } | ({ action: 'set-aside' } & GuardedFrame) {
  if (rest.length < 7 || rest[0] !== FRAME_HEADER) return null;
  const size = rest.readUInt32BE(3);
  if (
    (maxFrameSize > 0 && size > maxFrameSize) ||
    rest.length < 7 + size + 1 ||
    rest[7 + size] !== FRAME_END ||
    size < 14
  )
    return null;
  const payload = rest.subarray(7, 7 + size);
  if (payload.readUInt16BE(0) !== BASIC_CLASS) return null;
  const properties = payload.subarray(12);
  const answer = (fields: object, rejection: HeaderRejection): GuardedFrame => {
    rejections.set(fields, rejection);
    const frame = { id: BASIC_CLASS, channel: rest.readUInt16BE(1), size: Number(payload.readBigUInt64BE(4)), fields };
    return { frame, rest: rest.subarray(7 + size + 1) };
  };
  const check = inspectBasicProperties(properties, bounds);
  if (check.ok) {
    const detail = 'basic properties amqplib could not decode';
    return {
      action: 'decode',
      setAside: () => answer({}, { bound: 'malformed', detail, raw: Buffer.from(properties) }),
    };
  }
  return { action: 'set-aside', ...answer(check.properties, check.rejection) };
}

/**
 * Installs the guard on a connection amqplib just opened (before any channel can receive a
 * message). Returns false, changing nothing, if amqplib's internals are not what this expects
 * (a future major version): the caller logs that the guard is off.
 */
export function guardConnection(model: amqp.ChannelModel, bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS): boolean {
  const source = model.connection as unknown as FrameSource;
  if (typeof source.recvFrame !== 'function' || !Buffer.isBuffer(source.rest)) return false;
  // Bound to the same object it stays on; its own `this.recvFrame()` (waiting for more bytes) comes back here.
  const decode = source.recvFrame.bind(source);
  source.recvFrame = () => {
    const guarded = guardContentHeader(source.rest, source.maxFrameSize ?? 0, bounds);
    if (!guarded) return decode();
    if (guarded.action === 'decode') {
      try {
        // The frame is complete, so amqplib parses just this one: what it throws is about this header.
        return decode();
      } catch {
        // A throw from amqplib's accept loop would end the connection, and the redelivery would end the next one.
        const fallback = guarded.setAside();
        source.rest = fallback.rest;
        return fallback.frame;
      }
    }
    source.rest = guarded.rest;
    return guarded.frame;
  };
  return true;
}
