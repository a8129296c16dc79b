import { ConfigError } from '../runtime/errors.js';
import type { SchemaEvolution } from './upcast.js';

/** Inclusive range of schema versions. */
export interface VersionRange {
  min: number;
  max: number;
}

/**
 * The schema versions a consumer can read, per eventType. `anyOther`: a `'*'` handler or a
 * batchHandler takes every type not listed, in whatever version it comes (upcast passes those
 * through unchanged), so the consumer reads them all. A type neither listed nor covered by
 * `anyOther` is not this consumer's: its version is none of its business.
 */
export interface AcceptedVersions {
  types: Readonly<Record<string, readonly VersionRange[]>>;
  anyOther: boolean;
}

/** What a consumer's options say about the versions it reads (the fields the processor uses). */
export interface AcceptsSource {
  handlers: Readonly<Record<string, unknown>>;
  batchHandler?: unknown;
  schemas: SchemaEvolution;
}

/**
 * The versions upcast() lets through for one type: `current`, and every older version from
 * which an unbroken chain of upcasters leads up to it. Always one range ending at `current`.
 */
function evolutionRange(current: number, upcasters: Readonly<Record<number, unknown>> = {}): VersionRange {
  let min = current;
  while (min > 1 && upcasters[min - 1] !== undefined) min--;
  return { min, max: current };
}

/**
 * What the consumer with these options reads, mirroring upcast() and dispatch: a type with a
 * `schemas` entry reads that entry's range; a type with its own handler and no entry, version 1
 * only; with `'*'` or a batchHandler, any version of every other type. A `schemas` entry for a
 * type nothing handles is left out (the type itself is refused or ignored, whatever its version).
 */
export function acceptedVersions(source: AcceptsSource): AcceptedVersions {
  const anyOther = source.batchHandler !== undefined || Object.hasOwn(source.handlers, '*');
  const types: Record<string, VersionRange[]> = {};
  for (const type of Object.keys(source.handlers)) if (type !== '*') types[type] = [{ min: 1, max: 1 }];
  for (const [type, evolution] of Object.entries(source.schemas)) {
    if (!evolution || (!anyOther && !Object.hasOwn(source.handlers, type))) continue;
    types[type] = [evolutionRange(evolution.current, evolution.upcasters)];
  }
  return { types, anyOther };
}

/** Whether `accepted` reads `eventType` at `version`; 'not-consumer' when the type is not its own. */
export function acceptsVersion(
  accepted: AcceptedVersions,
  eventType: string,
  version: number,
): 'yes' | 'no' | 'not-consumer' {
  const ranges = accepted.types[eventType];
  if (!ranges) return accepted.anyOther ? 'yes' : 'not-consumer';
  return ranges.some((r) => version >= r.min && version <= r.max) ? 'yes' : 'no';
}

const formatRange = (r: VersionRange) => (r.min === r.max ? String(r.min) : `${r.min}-${r.max}`);

/**
 * The canonical text of accepted versions: `OrderPaid:1-2,OrderShipped:1`, types sorted, `*` last
 * when any other type is read. The registry stores it and `converge compat` prints it, so an
 * older entry can be handed to `--accepts` unchanged.
 */
export function formatAccepts(accepted: AcceptedVersions): string {
  const items = Object.keys(accepted.types)
    .sort()
    .map((type) => `${type}:${accepted.types[type]!.map(formatRange).join(';')}`);
  if (accepted.anyOther) items.push('*');
  return items.join(',');
}

const ITEM = /^([^:,*\s][^:,\s]*):(\d{1,9}(?:-\d{1,9})?(?:;\d{1,9}(?:-\d{1,9})?)*)$/;

/**
 * Reads the text formatAccepts writes (also by hand: `OrderPaid:1-2,OrderShipped:1`). A type given
 * twice keeps both ranges. A bad spec is a ConfigError naming `field`, and quotes no more than the item.
 */
export function parseAccepts(spec: string, field = 'accepts'): AcceptedVersions {
  const types: Record<string, VersionRange[]> = {};
  let anyOther = false;
  const items = spec
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) throw new ConfigError(field, 'empty: expected e.g. OrderPaid:1-2,OrderShipped:1');
  for (const item of items) {
    if (item === '*') {
      anyOther = true;
      continue;
    }
    const match = ITEM.exec(item);
    if (!match) throw new ConfigError(field, `"${item}" is not eventType:version or eventType:min-max`);
    for (const part of match[2]!.split(';')) {
      const [min, max = min] = part.split('-').map(Number) as [number, number?];
      if (min < 1 || max < min) throw new ConfigError(field, `"${item}": versions start at 1 and ranges go up`);
      (types[match[1]!] ??= []).push({ min, max });
    }
  }
  return { types, anyOther };
}
