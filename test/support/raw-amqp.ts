/**
 * A tiny AMQP 0-9-1 publisher over node:net, for messages amqplib will not (or cannot) encode:
 * hostile header tables (nested thousands deep, unknown field types, truncated), properties
 * given byte for byte. It speaks just enough of the protocol: the handshake (PLAIN, no
 * heartbeats), one channel in confirm mode, basic.publish with a content header and body frames,
 * and the broker's answers (basic.ack / basic.nack / basic.return, channel.close, connection.close).
 *
 * ```ts
 * await publishRaw({ url, exchange, routingKey, headersBytes: nestedTable(4_000), body, properties: { messageId } });
 * const publisher = await openRawPublisher(url);   // many messages on one connection
 * const outcome = await publisher.publish({ exchange, routingKey, body });
 * await publisher.close();
 * ```
 *
 * `publish` resolves once the broker confirmed the message: `{ outcome: 'acked' }`, `'nacked'`, or
 * `'returned'` (mandatory and unroutable). It rejects with RawAmqpRefused (replyCode, replyText)
 * when the broker closes the channel or connection instead. After a channel close the next publish
 * opens a new channel; after a connection close (RabbitMQ answers a malformed header table with
 * 541 INTERNAL_ERROR on the connection) every later publish rejects with the same error: open a
 * new publisher. `close()` is always safe to call.
 */
import net from 'node:net';

/** A shortstr property: text (UTF-8), or bytes as they are (any bytes, invalid UTF-8 included). */
export type ShortString = string | Buffer;

/** Basic properties to encode; `headersBytes` (or `headers`) becomes the header table. */
export interface RawProperties {
  contentType?: ShortString;
  contentEncoding?: ShortString;
  /** A table built with encodeTable; ignored when headersBytes is given. */
  headers?: Record<string, TableValue>;
  deliveryMode?: number;
  priority?: number;
  correlationId?: ShortString;
  replyTo?: ShortString;
  expiration?: ShortString;
  messageId?: ShortString;
  /** Seconds since the epoch; a bigint reaches the whole unsigned 64-bit range. */
  timestamp?: number | bigint;
  type?: ShortString;
  userId?: ShortString;
  appId?: ShortString;
}

export interface RawMessage {
  exchange: string;
  routingKey: string;
  body: Buffer;
  properties?: RawProperties;
  /** The header table's content (the field pairs, without the table's own 4-byte length), byte for byte. */
  headersBytes?: Buffer;
  /** The whole basic-properties part of the content header (flags and fields) byte for byte; overrides the two above. */
  propertiesBytes?: Buffer;
  /** Default true, as converge's relay publishes. */
  mandatory?: boolean;
}

export type RawOutcome = { outcome: 'acked' } | { outcome: 'nacked' } | { outcome: 'returned'; replyCode: number };

/** The broker closed the channel or the connection instead of confirming. */
export class RawAmqpRefused extends Error {
  constructor(
    readonly scope: 'channel' | 'connection',
    readonly replyCode: number,
    readonly replyText: string,
  ) {
    super(`broker closed the ${scope}: ${replyCode} ${replyText}`);
    this.name = 'RawAmqpRefused';
  }
}

export interface RawPublisher {
  publish(message: RawMessage): Promise<RawOutcome>;
  close(): Promise<void>;
}

/** One message on a connection of its own. */
export async function publishRaw(message: RawMessage & { url: string }): Promise<RawOutcome> {
  const publisher = await openRawPublisher(message.url);
  try {
    return await publisher.publish(message);
  } finally {
    await publisher.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Field tables
// ---------------------------------------------------------------------------------------------

/** What encodeTable writes: text 'S', integers 'l', other numbers 'd', booleans 't', Buffer 'x', null 'V', arrays 'A', objects 'F'. */
export type TableValue = string | number | boolean | null | Buffer | TableValue[] | { [key: string]: TableValue };

/** The content of a field table (without its 4-byte length), as headersBytes takes it. */
export function encodeTable(table: Record<string, TableValue>): Buffer {
  return Buffer.concat(Object.entries(table).flatMap(([key, value]) => [shortstr(key), encodeValue(value)]));
}

function encodeValue(value: TableValue): Buffer {
  if (typeof value === 'string') return Buffer.concat([Buffer.from('S'), longstr(Buffer.from(value))]);
  if (typeof value === 'boolean') return Buffer.from([0x74, value ? 1 : 0]);
  if (value === null) return Buffer.from('V');
  if (Buffer.isBuffer(value)) return Buffer.concat([Buffer.from('x'), longstr(value)]);
  if (typeof value === 'number') {
    const out = Buffer.alloc(9);
    if (Number.isSafeInteger(value)) {
      out.write('l');
      out.writeBigInt64BE(BigInt(value), 1);
    } else {
      out.write('d');
      out.writeDoubleBE(value, 1);
    }
    return out;
  }
  if (Array.isArray(value)) return Buffer.concat([Buffer.from('A'), longstr(Buffer.concat(value.map(encodeValue)))]);
  return Buffer.concat([Buffer.from('F'), longstr(encodeTable(value))]);
}

/**
 * `{ [key]: { [key]: … {} } }`, `depth` tables deep (7 bytes a level with a one-letter key),
 * built without recursion so any depth can be made.
 */
export function nestedTable(depth: number, key = 'a'): Buffer {
  const name = Buffer.from(key);
  const level = 1 + name.length + 1 + 4;
  const out = Buffer.alloc(level * depth);
  for (let i = 0, at = 0; i < depth; i++) {
    at = out.writeUInt8(name.length, at);
    at += name.copy(out, at);
    at = out.writeUInt8(0x46, at); // 'F'
    at = out.writeUInt32BE(level * (depth - 1 - i), at);
  }
  return out;
}

/** The basic-properties part of a content header: flags, then the fields present. */
export function encodeProperties(properties: RawProperties = {}, headersBytes?: Buffer): Buffer {
  const headers = headersBytes ?? (properties.headers ? encodeTable(properties.headers) : undefined);
  let flags = 0;
  const parts: Buffer[] = [];
  const field = (bit: number, value: Buffer | undefined) => {
    if (value === undefined) return;
    flags |= 1 << bit;
    parts.push(value);
  };
  const str = (s: ShortString | undefined) => (s === undefined ? undefined : shortstr(s));
  field(15, str(properties.contentType));
  field(14, str(properties.contentEncoding));
  field(13, headers && longstr(headers));
  field(12, properties.deliveryMode === undefined ? undefined : Buffer.from([properties.deliveryMode]));
  field(11, properties.priority === undefined ? undefined : Buffer.from([properties.priority]));
  field(10, str(properties.correlationId));
  field(9, str(properties.replyTo));
  field(8, str(properties.expiration));
  field(7, str(properties.messageId));
  field(6, properties.timestamp === undefined ? undefined : u64(properties.timestamp));
  field(5, str(properties.type));
  field(4, str(properties.userId));
  field(3, str(properties.appId));
  const head = Buffer.alloc(2);
  head.writeUInt16BE(flags);
  return Buffer.concat([head, ...parts]);
}

function shortstr(s: ShortString): Buffer {
  const bytes = Buffer.isBuffer(s) ? s : Buffer.from(s);
  if (bytes.length > 255) throw new RangeError('shortstr over 255 bytes');
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

function longstr(bytes: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(bytes.length);
  return Buffer.concat([head, bytes]);
}

function u64(n: number | bigint): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(BigInt(n));
  return out;
}

const u16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
const method = (classId: number, methodId: number, ...args: Buffer[]) =>
  Buffer.concat([u16(classId), u16(methodId), ...args]);

// ---------------------------------------------------------------------------------------------
// Frames and the connection
// ---------------------------------------------------------------------------------------------

interface Frame {
  type: number;
  channel: number;
  payload: Buffer;
}

const FRAME_END = 0xce;

function frame(type: number, channel: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(7);
  head.writeUInt8(type, 0);
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([FRAME_END])]);
}

/** Splits `buffer` into whole frames; returns the rest. */
function parseFrames(buffer: Buffer): { frames: Frame[]; rest: Buffer } {
  const frames: Frame[] = [];
  let at = 0;
  while (buffer.length - at >= 8) {
    const size = buffer.readUInt32BE(at + 3);
    if (buffer.length - at < size + 8) break;
    frames.push({
      type: buffer[at]!,
      channel: buffer.readUInt16BE(at + 1),
      payload: buffer.subarray(at + 7, at + 7 + size),
    });
    at += size + 8;
  }
  return { frames, rest: buffer.subarray(at) };
}

const CHANNEL = 1;

/** Opens a connection (PLAIN login from the URL) with one confirm channel. */
export async function openRawPublisher(url: string): Promise<RawPublisher> {
  const target = new URL(url);
  const socket = net.connect({ host: target.hostname, port: Number(target.port || 5672) });
  socket.setNoDelay(true);
  let pending: Buffer = Buffer.alloc(0);
  const waiters: ((f: Frame) => boolean)[] = [];
  let failure: Error | null = null;
  const failAll = new Set<(err: Error) => void>();
  let frameMax = 131_072;

  const fail = (err: Error) => {
    failure ??= err;
    for (const reject of failAll) reject(err);
    failAll.clear();
  };
  socket.on('error', fail);
  socket.on('close', () => fail(new Error('raw AMQP socket closed')));
  socket.on('data', (chunk: Buffer) => {
    const { frames, rest } = parseFrames(Buffer.concat([pending, chunk]));
    pending = rest;
    for (const f of frames) onFrame(f);
  });

  const send = (type: number, channel: number, payload: Buffer) => socket.write(frame(type, channel, payload));
  const sendMethod = (channel: number, payload: Buffer) => send(1, channel, payload);

  const onFrame = (f: Frame) => {
    if (f.type !== 1) return; // heartbeats, and content of a basic.return: not needed
    const id = f.payload.readUInt32BE(0);
    if (id === 0x000a0032) {
      // connection.close
      sendMethod(0, method(10, 51));
      const { code, text } = closeReason(f.payload);
      fail(new RawAmqpRefused('connection', code, text));
      socket.end();
      return;
    }
    if (id === 0x00140028) {
      // channel.close
      sendMethod(f.channel, method(20, 41));
      const { code, text } = closeReason(f.payload);
      channelOpen = false;
      for (const reject of channelWaiters.splice(0)) reject(new RawAmqpRefused('channel', code, text));
      return;
    }
    const index = waiters.findIndex((accept) => accept(f));
    if (index >= 0) waiters.splice(index, 1);
  };

  const expect = (classId: number, methodId: number, channel = 0) =>
    new Promise<Buffer>((resolve, reject) => {
      if (failure) return reject(failure);
      failAll.add(reject);
      waiters.push((f) => {
        if (f.channel !== channel || f.payload.readUInt16BE(0) !== classId || f.payload.readUInt16BE(2) !== methodId)
          return false;
        failAll.delete(reject);
        resolve(f.payload.subarray(4));
        return true;
      });
    });

  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = expect(10, 10);
  socket.write(Buffer.from('AMQP\x00\x00\x09\x01', 'latin1'));
  await started;
  const user = decodeURIComponent(target.username || 'guest');
  const password = decodeURIComponent(target.password || 'guest');
  const tuned = expect(10, 30);
  sendMethod(
    0,
    method(
      10,
      11,
      longstr(encodeTable({ product: 'converge raw-amqp test publisher' })),
      shortstr('PLAIN'),
      longstr(Buffer.from(`\0${user}\0${password}`)),
      shortstr('en_US'),
    ),
  );
  const tune = await tuned;
  const channelMax = tune.readUInt16BE(0);
  frameMax = tune.readUInt32BE(2) || frameMax;
  const tuneOk = Buffer.alloc(8);
  tuneOk.writeUInt16BE(channelMax, 0);
  tuneOk.writeUInt32BE(frameMax, 2);
  tuneOk.writeUInt16BE(0, 6); // no heartbeats
  sendMethod(0, method(10, 31, tuneOk));
  const opened = expect(10, 41);
  const vhost = decodeURIComponent(target.pathname.slice(1)) || '/';
  sendMethod(0, method(10, 40, shortstr(vhost), shortstr(''), Buffer.from([0])));
  await opened;

  let channelOpen = false;
  let published = 0;
  const channelWaiters: ((err: Error) => void)[] = [];
  const openChannel = async () => {
    const ok = expect(20, 11, CHANNEL);
    sendMethod(CHANNEL, method(20, 10, shortstr('')));
    await ok;
    const selected = expect(85, 11, CHANNEL);
    sendMethod(CHANNEL, method(85, 10, Buffer.from([0])));
    await selected;
    channelOpen = true;
    published = 0;
  };

  // One publish at a time keeps confirms trivially matched to messages.
  let queue: Promise<unknown> = Promise.resolve();
  const publishOne = async (message: RawMessage): Promise<RawOutcome> => {
    if (failure) throw failure;
    if (!channelOpen) await openChannel();
    const props = message.propertiesBytes ?? encodeProperties(message.properties, message.headersBytes);
    const tag = ++published;
    let accept: ((f: Frame) => boolean) | undefined;
    let rejecter: ((err: Error) => void) | undefined;
    const answer = new Promise<RawOutcome>((resolve, reject) => {
      rejecter = reject;
      channelWaiters.push(reject);
      failAll.add(reject);
      let returned: RawOutcome | null = null;
      accept = (f: Frame): boolean => {
        if (f.channel !== CHANNEL) return false;
        const id = f.payload.readUInt32BE(0);
        if (id === 0x003c0032) {
          // basic.return comes before the ack of the same message
          returned = { outcome: 'returned', replyCode: f.payload.readUInt16BE(4) };
          waiters.push(accept!);
          return true;
        }
        if ((id !== 0x003c0050 && id !== 0x003c0078) || Number(f.payload.readBigUInt64BE(4)) < tag) return false;
        resolve(returned ?? { outcome: id === 0x003c0050 ? 'acked' : 'nacked' });
        return true;
      };
      waiters.push(accept);
    });
    const bits = Buffer.from([message.mandatory === false ? 0 : 1]);
    sendMethod(CHANNEL, method(60, 40, u16(0), shortstr(message.exchange), shortstr(message.routingKey), bits));
    const header = Buffer.alloc(12);
    header.writeUInt16BE(60, 0);
    header.writeUInt16BE(0, 2);
    header.writeBigUInt64BE(BigInt(message.body.length), 4);
    send(2, CHANNEL, Buffer.concat([header, props]));
    const maxBody = frameMax - 8;
    for (let at = 0; at < message.body.length; at += maxBody) send(3, CHANNEL, message.body.subarray(at, at + maxBody));
    try {
      return await answer;
    } finally {
      // A refused message leaves no waiter behind to catch the confirms of the next channel.
      channelWaiters.length = 0;
      failAll.delete(rejecter!);
      const left = waiters.indexOf(accept!);
      if (left >= 0) waiters.splice(left, 1);
    }
  };

  return {
    publish: (message) => {
      const result = queue.then(() => publishOne(message));
      queue = result.catch(() => undefined);
      return result;
    },
    close: async () => {
      if (!failure) {
        const closed = expect(10, 51).catch(() => undefined);
        sendMethod(0, method(10, 50, u16(200), shortstr('bye'), u16(0), u16(0)));
        await closed;
      }
      socket.destroy();
    },
  };
}

function closeReason(payload: Buffer): { code: number; text: string } {
  const code = payload.readUInt16BE(4);
  const length = payload.readUInt8(6);
  return { code, text: payload.toString('utf8', 7, 7 + length) };
}
