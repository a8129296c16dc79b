/**
 * Personal data in payloads: the paths a catalog marks sensitive, how they travel (one AMQP
 * header the relay copies from the outbox row), and how displays mask them. Pure functions, no I/O.
 */

/** What a display shows instead of a sensitive value. */
export const REDACTED = '[redacted]';

/**
 * The header that carries an event's sensitive paths, comma-separated; an empty value means
 * "declared: nothing sensitive". A message without it was written without a catalog (or by an
 * older converge), so displays treat its whole payload as sensitive.
 */
export const SENSITIVE_HEADER = 'x-converge-sensitive';

/** One segment of a sensitive path: a field name; dots separate segments and commas paths. */
export const SENSITIVE_SEGMENT = /^[A-Za-z0-9_$-]{1,64}$/;

/** Bodies larger than this are not parsed to scrub a failure's text (see scrubDetail). */
const MAX_SCRUBBED_BODY_BYTES = 1024 * 1024;

/** Free-text values shorter than this are not searched for in messages (a two-letter value names nobody). */
const MIN_SCRUBBED_LENGTH = 3;

/** Why `path` cannot be a sensitive path, or undefined if it can. */
export function sensitivePathProblem(path: string): string | undefined {
  if (path.split('.').every((segment) => SENSITIVE_SEGMENT.test(segment))) return undefined;
  return 'a dotted path of field names (letters, digits, _ $ -), e.g. address.street';
}

/** The header value for a list of paths (the outbox column holds the same text). */
export function encodeSensitivePaths(paths: readonly string[]): string {
  return paths.join(',');
}

/**
 * The paths a header (or outbox column) value names; undefined when there is none or it is not
 * a list of valid paths, which a display must treat as "everything is sensitive".
 */
export function decodeSensitivePaths(value: unknown): string[] | undefined {
  const text = Buffer.isBuffer(value) ? value.toString('utf8') : value;
  if (typeof text !== 'string') return undefined;
  if (text === '') return [];
  const paths = text.split(',');
  return paths.every((path) => sensitivePathProblem(path) === undefined) ? paths : undefined;
}

/**
 * A copy of `value` with every field a path names replaced by REDACTED (a whole subtree when the
 * field holds an object). Arrays are transparent: `items.email` masks `email` in every element
 * of `items`. A path that names nothing changes nothing; `value` itself is never modified.
 */
export function redactPaths(value: unknown, paths: readonly string[]): unknown {
  let result = value;
  for (const path of paths) result = redactAt(result, path.split('.'));
  return result;
}

function redactAt(value: unknown, segments: readonly string[]): unknown {
  if (Array.isArray(value)) {
    const masked = value.map((item: unknown) => redactAt(item, segments));
    return masked.some((item, i) => item !== value[i]) ? masked : value;
  }
  if (typeof value !== 'object' || value === null) return value;
  const [head, ...rest] = segments;
  const record = value as Record<string, unknown>;
  if (head === undefined || !Object.hasOwn(record, head)) return value;
  const next = rest.length === 0 ? REDACTED : redactAt(record[head], rest);
  return next === record[head] ? value : { ...record, [head]: next };
}

/**
 * The strings and numbers at the sensitive paths of `value` (all of them when `paths` is
 * undefined), each distinct and longest first, so a display can also mask them where a handler
 * copied them into a free-text message.
 */
export function sensitiveValues(value: unknown, paths: readonly string[] | undefined): string[] {
  const found = new Set<string>();
  if (paths === undefined) collectAt(value, [], found);
  for (const path of paths ?? []) collectAt(value, path.split('.'), found);
  return [...found].filter((text) => text.length >= MIN_SCRUBBED_LENGTH).sort((a, b) => b.length - a.length);
}

function collectAt(value: unknown, segments: readonly string[], found: Set<string>): void {
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) collectAt(item, segments, found);
    return;
  }
  if (segments.length === 0) {
    if (typeof value === 'string') found.add(value);
    else if (typeof value === 'number' && Number.isFinite(value)) found.add(String(value));
    else if (typeof value === 'object' && value !== null)
      for (const child of Object.values(value)) collectAt(child, [], found);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const [head, ...rest] = segments;
  if (head !== undefined && Object.hasOwn(value, head))
    collectAt((value as Record<string, unknown>)[head], rest, found);
}

/** `text` with every occurrence of each of `values` replaced by REDACTED. */
export function scrubText(text: string, values: readonly string[]): string {
  let result = text;
  for (const value of values) result = result.split(value).join(REDACTED);
  return result;
}

/**
 * What the producer stores of a payload a schema accepted: the payload as given (the consumer's
 * schema judges that, not the producer's output), without any object key the schema's output
 * dropped. So an object schema that strips unknown keys (zod's default) keeps an undeclared field
 * out of the outbox, while defaults and transforms stay the consumer's to apply. Arrays are kept
 * element by element when the output has the same length; anything else is kept as given.
 */
export function keepDeclared(given: unknown, output: unknown): unknown {
  if (Array.isArray(given)) {
    if (!Array.isArray(output) || output.length !== given.length) return given;
    return given.map((item: unknown, i) => keepDeclared(item, output[i]));
  }
  if (!isPlainObject(given) || !isPlainObject(output)) return given;
  const kept: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(given)) {
    if (Object.hasOwn(output, key)) kept[key] = keepDeclared(item, output[key]);
  }
  return kept;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * A failure's free text as the quarantine stores it: the values at the paths a message's header
 * marks sensitive, wherever a handler copied them into its error message, become REDACTED, so
 * no list or display of the quarantine shows them. A message without the header keeps its text
 * (its displays mask what they can; see displayQuarantined).
 */
export function scrubDetail(detail: string, headers: Record<string, unknown> | undefined, body: Buffer): string {
  const paths = decodeSensitivePaths(headers?.[SENSITIVE_HEADER]);
  // A body this large was refused unread (BodyTooLargeError); no handler saw it to quote it.
  if (paths === undefined || paths.length === 0 || body.length > MAX_SCRUBBED_BODY_BYTES) return detail;
  let payload: unknown;
  try {
    payload = (JSON.parse(body.toString('utf8')) as { payload?: unknown } | null)?.payload;
  } catch {
    return detail;
  }
  return scrubText(detail, sensitiveValues(payload, paths));
}
