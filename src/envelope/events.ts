import { z } from 'zod';
import { ConfigError, EnvelopeValidationError, PayloadValidationError } from '../runtime/errors.js';
import { defineOptions } from '../runtime/options.js';
import { keepDeclared, sensitivePathProblem } from './redact.js';
import type { EventEnvelope, NewEvent } from './envelope.js';
import type { InferInput, InferOutput, StandardSchemaIssue, StandardSchemaV1 } from './standard-schema.js';

/**
 * The event map when none is given: any eventType, payload `unknown`. An event map with a
 * string index signature counts as untyped; one with named keys types every event by its name.
 */
export type UntypedEvents = Record<string, unknown>;

/**
 * What `defineEvents` returns and `appendToOutbox`, `startConsumer` and the handler types take
 * as `events`. `M` maps event types to the payloads handlers see, `I` to the payloads producers
 * write (they differ only where a schema transforms, e.g. a default or a coercion).
 */
export interface EventCatalog<M extends object = UntypedEvents, I extends object = M> {
  /** One Standard Schema per event type; undefined for a type-only catalog (`defineEvents<M>()`). */
  readonly schemas: Readonly<Record<string, StandardSchemaV1>> | undefined;
  /** Per event type, the payload paths that hold personal data (defineEvents' `sensitive` option). */
  readonly sensitive?: Readonly<Record<string, readonly string[]>> | undefined;
  /** Carries the two maps for the compiler only; never set at runtime. */
  readonly '~types'?: { readonly payloads: M; readonly inputs: I } | undefined;
}

/** The payload map of a catalog, or the event map itself. */
export type PayloadsOf<C> = C extends EventCatalog<infer M, object> ? M : C;
/** The producer-side payload map of a catalog, or the event map itself. */
export type InputsOf<C> = C extends EventCatalog<object, infer I> ? I : C;

/** True for an event map that names no types (a string index signature): payloads are `unknown`. */
export type IsUntyped<M> = string extends keyof M ? true : false;

/**
 * The envelope a handler receives for event type `K` of an event map or catalog `C`; without
 * `K`, the union of all of them, which `switch (event.eventType)` narrows.
 */
export type EventOf<C, K extends keyof PayloadsOf<C> & string = keyof PayloadsOf<C> & string> = {
  [T in K]: EventEnvelope<PayloadsOf<C>[T], T>;
}[K];

/** The event a producer appends for type `K` of `C` (all of them without `K`): eventType a key, payload its type. */
export type NewEventOf<C, K extends keyof InputsOf<C> & string = keyof InputsOf<C> & string> = {
  [T in K]: NewEvent<InputsOf<C>[T], T>;
}[K];

type SchemaMap = Record<string, StandardSchemaV1>;

export const defineEventsOptions = defineOptions(
  'defineEvents',
  z.strictObject({
    sensitive: z
      .record(
        z.string(),
        z.array(
          z.string().superRefine((path, ctx) => {
            const problem = sensitivePathProblem(path);
            if (problem) ctx.addIssue({ code: 'custom', message: problem });
          }),
        ),
      )
      .default({})
      .describe(
        "Per event type, payload paths holding personal data (e.g. { CustomerRegistered: ['email', 'address.street'] }): recorded with each event and masked in quarantine displays, dlq show and the dashboard.",
      ),
  }),
);

/** defineEvents' second argument; `sensitive` names only event types of the catalog. */
export interface DefineEventsOptions<K extends string = string> {
  sensitive?: { readonly [T in K]?: readonly string[] };
}

/**
 * Declares the event types a producer writes or a consumer reads. With Standard Schema objects
 * (zod, valibot, arktype, ...) the payload types are inferred and checked at runtime: the
 * producer rejects a payload that does not match and writes only the fields the schema keeps,
 * the consumer quarantines one. With a type argument and no schemas (`defineEvents<OrderEvents>()`)
 * it types the code and checks nothing.
 */
export function defineEvents<M extends object>(): EventCatalog<M>;
export function defineEvents<S extends SchemaMap>(
  schemas: S,
  options?: DefineEventsOptions<keyof S & string>,
): EventCatalog<{ [K in keyof S]: InferOutput<S[K]> }, { [K in keyof S]: InferInput<S[K]> }>;
export function defineEvents(schemas?: SchemaMap, options?: DefineEventsOptions): EventCatalog {
  if (schemas === undefined) return Object.freeze({ schemas: undefined });
  const problems = Object.entries(schemas)
    .filter(([, schema]) => !isStandardSchema(schema))
    .map(([type]) => ({ path: type, message: 'must be a Standard Schema v1 object (zod, valibot, arktype, ...)' }));
  if (problems.length > 0) throw new ConfigError(problems);
  const { sensitive } = defineEventsOptions.parse(options);
  const unknownTypes = Object.keys(sensitive)
    .filter((type) => !Object.hasOwn(schemas, type))
    .map((type) => ({ path: `sensitive.${type}`, message: 'not an event type of this catalog' }));
  if (unknownTypes.length > 0) throw new ConfigError(unknownTypes);
  const frozen = Object.fromEntries(
    Object.entries(sensitive).map(([type, paths]) => [type, Object.freeze([...new Set(paths)])]),
  );
  return Object.freeze({ schemas: Object.freeze({ ...schemas }), sensitive: Object.freeze(frozen) });
}

/** A catalog made by defineEvents (as the consumer's `events` option checks it). */
export function isEventCatalog(value: unknown): value is EventCatalog {
  if (typeof value !== 'object' || value === null || !('schemas' in value)) return false;
  const schemas = value.schemas;
  return schemas === undefined || (typeof schemas === 'object' && schemas !== null);
}

function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const props = (value as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return typeof props === 'object' && props !== null && props.version === 1 && typeof props.validate === 'function';
}

/**
 * Checks `payload` against the catalog's schema for `eventType` and returns the schema's output
 * (the value a handler sees). A type-only catalog returns the payload as it is; a catalog with
 * schemas rejects a type it does not list.
 */
export async function validatePayload(
  catalog: EventCatalog<object, object> | undefined,
  eventType: string,
  payload: unknown,
): Promise<unknown> {
  const schemas = catalog?.schemas;
  if (!schemas) return payload;
  const schema = Object.hasOwn(schemas, eventType) ? schemas[eventType] : undefined;
  if (!schema) throw new EnvelopeValidationError('eventType', 'not in the event catalog');
  const result = await schema['~standard'].validate(payload);
  if (result.issues) throw new PayloadValidationError(eventType, issuePaths(result.issues));
  return result.value;
}

/** What the producer writes for one event: the payload to store and the paths to mark. */
export interface ProducedPayload {
  payload: unknown;
  /** Comma-free list of sensitive paths; undefined when the catalog cannot say (no schemas). */
  sensitive: readonly string[] | undefined;
}

/**
 * Checks a payload as validatePayload does and returns what the outbox stores: the payload as
 * given, less every object key the schema's output dropped (see keepDeclared), so a field the
 * schema does not declare never reaches the outbox. A schema that rejects unknown keys
 * (`z.strictObject`) throws PayloadValidationError instead.
 */
export async function producePayload(
  catalog: EventCatalog<object, object> | undefined,
  eventType: string,
  payload: unknown,
): Promise<ProducedPayload> {
  if (!catalog?.schemas) return { payload, sensitive: undefined };
  const output = await validatePayload(catalog, eventType, payload);
  const sensitive =
    catalog.sensitive && Object.hasOwn(catalog.sensitive, eventType) ? catalog.sensitive[eventType] : [];
  return { payload: keepDeclared(payload, output), sensitive: sensitive ?? [] };
}

/** The catalog lists this event type (always true for a type-only catalog or none). */
export function catalogAccepts(catalog: EventCatalog<object, object> | undefined, eventType: string): boolean {
  const schemas = catalog?.schemas;
  return !schemas || Object.hasOwn(schemas, eventType);
}

const MAX_PATHS = 10;
const PLAIN_SEGMENT = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;

/** Distinct dotted paths of the issues; a segment that is not a plain name or index becomes `*`. */
export function issuePaths(issues: readonly StandardSchemaIssue[]): string[] {
  const paths = new Set<string>();
  for (const issue of issues) {
    const segments = (issue.path ?? []).map((segment) => {
      const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
      if (typeof key === 'number') return Number.isInteger(key) && key >= 0 ? String(key) : '*';
      return typeof key === 'string' && (PLAIN_SEGMENT.test(key) || /^\d{1,9}$/.test(key)) ? key : '*';
    });
    paths.add(segments.length > 0 ? segments.join('.') : '(root)');
    if (paths.size === MAX_PATHS) break;
  }
  return paths.size > 0 ? [...paths] : ['(root)'];
}

/** The `events` option of appendToOutbox and the consumer: a catalog made by defineEvents. */
export const eventCatalogOption = z
  .custom<EventCatalog>(isEventCatalog, 'must be an event catalog made by defineEvents')
  .meta({ typeName: 'EventCatalog' });
